// The host functions a plugin instance is linked with, and how a call that threw is named: one
// definition for the worker thread (pluginWorker.mjs) and the in-process runner (meteredRunner.ts),
// so a call answered inline and the same call rerun on a worker answer alike.

/** Outcome statuses, by their index in a worker's result record. */
export const StatusNames = ["ok", "trap", "memory_limit", "plugin_error", "no_output", "host_fault", "too_large", "timeout"]

/** A host function could not answer: the plugin traps with this fault. */
export class HostFault extends Error {}
/** The plugin's host-side allocations went over its memory budget. */
export class MemoryLimit extends Error {}

const MaxLogLines = 64
const MaxLogLine = 2048

/** What the host functions record during one call; a fresh one before each call. */
export const callState = () => ({ allocated: 0, error: null, memoryExceeded: false, logs: [] })

/**
 * The `extism:host/env` and `extism:host/user` functions for the granted host functions.
 * `state()` is the running call's record; `hostCall(fn, arg)` answers a kernel host function
 * synchronously or throws a HostFault.
 */
export const hostImports = ({ granted, memoryMaxPages, state, hostCall }) => {
  const budget = memoryMaxPages * 65536
  const text = (ctx, addr) => ctx.read(addr)?.text() ?? ""
  const log = (ctx, addr) => {
    const { logs } = state()
    if (logs.length < MaxLogLines) logs.push(text(ctx, addr).slice(0, MaxLogLine))
  }
  const user = {}
  if (granted.has("wk_log")) user.wk_log = log
  if (granted.has("wk_now")) user.wk_now = () => BigInt(Number(hostCall("wk_now", null)))
  if (granted.has("wk_kv_get"))
    user.wk_kv_get = (ctx, addr) => {
      const value = hostCall("wk_kv_get", text(ctx, addr))
      return value === null ? 0n : ctx.store(String(value))
    }
  if (granted.has("wk_counter")) user.wk_counter = (ctx, addr) => Number(hostCall("wk_counter", text(ctx, addr)))
  if (granted.has("wk_publish"))
    user.wk_publish = (ctx, subject, data) => {
      hostCall("wk_publish", { subject: text(ctx, subject), data: text(ctx, data) })
    }
  const env = {
    // Host-side blocks live outside wasm memory: count them against the same budget.
    alloc: (ctx, n) => {
      const s = state()
      s.allocated += Number(n)
      if (s.allocated > budget) {
        s.memoryExceeded = true
        throw new MemoryLimit(`host allocations over ${budget} bytes`)
      }
      return ctx.alloc(n)
    },
    // Keep the message instead of the SDK's error block, which is lost when the plugin then traps.
    error_set: (ctx, addr) => {
      state().error = text(ctx, addr) || "error"
    }
  }
  if (granted.has("wk_log")) for (const level of ["log_info", "log_warn", "log_debug", "log_error"]) env[level] = log
  return { env, user }
}

/**
 * The status and text of a call that threw: out of fuel is a timeout, then a host fault, then
 * memory (over the allocation budget, or wasm memory grown past half its cap), else a trap.
 */
export const faultOf = ({ error, outOfFuel, budget, timeoutMs, state, memoryPages, memoryMaxPages }) => {
  const status = outOfFuel ? "timeout" : error instanceof HostFault ? "host_fault" : state.memoryExceeded || error instanceof MemoryLimit || memoryPages > memoryMaxPages / 2 ? "memory_limit" : "trap"
  const text = outOfFuel
    ? `fuel budget of ${budget} units (${timeoutMs} ms) exhausted`
    : (state.error !== null ? state.error + " / " : "") + (error instanceof Error ? `${error.name}: ${error.message}` : String(error))
  return { status, text }
}
