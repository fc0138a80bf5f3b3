import { Context, Effect, Layer } from "effect"
import type { JsonValue } from "../schema/Json.js"
import type { ResolvedPin } from "../schema/PluginPin.js"
import type { HostHandler } from "./internal/pluginRunner.js"

/**
 * The data behind capability-scoped host functions. The kernel backs it with its KV buckets
 * and counters; the host only ever asks for keys and counters the pin grants.
 */
export class PluginHostEnv extends Context.Tag("wk/PluginHostEnv")<
  PluginHostEnv,
  {
    /** A KV value (already checked against the granted prefix), or null when absent. */
    readonly kvGet: (key: string) => Effect.Effect<string | null>
    /** A named counter for a principal, e.g. "spent_today"; 0 when unknown. */
    readonly counter: (name: string, principal: string) => Effect.Effect<number>
    /**
     * Publishes one message (capability `publish`; subject already checked against the granted
     * prefix). Fire and forget: it must not block the plugin, and a failure to publish is the
     * sink's loss, never a change to a decision.
     */
    readonly publish: (subject: string, data: string) => Effect.Effect<void>
  }
>() {}

/** Largest message a plugin may publish, in UTF-16 code units of its text. */
export const MaxPublishChars = 64 * 1024

const PublishSubject = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

/** Host data in memory: `kv` by key, `counters[name][principal]`; published messages are appended to `published`. */
export const layerHostEnvMemory = (
  data: {
    readonly kv?: Readonly<Record<string, string>>
    readonly counters?: Readonly<Record<string, Readonly<Record<string, number>>>>
    readonly published?: Array<{ readonly subject: string; readonly data: string }>
  } = {}
) =>
  Layer.succeed(PluginHostEnv, {
    kvGet: (key) => Effect.succeed(data.kv?.[key] ?? null),
    counter: (name, principal) => Effect.succeed(data.counters?.[name]?.[principal] ?? 0),
    publish: (subject, text) => Effect.sync(() => void data.published?.push({ subject, data: text }))
  })

/** One recorded host-function call: what the plugin asked and what it got back. */
export interface HostValue {
  readonly fn: string
  readonly arg: JsonValue
  readonly value?: JsonValue
  readonly fault?: string
}

/**
 * Serves the host functions of one call, scoped to what the pin grants. The kernel clock is
 * the call's `now`, never the wall clock, so a re-run sees the same time.
 */
export const grantedHostHandler = (
  pin: ResolvedPin,
  call: { readonly principal: string; readonly now: number },
  env: Context.Tag.Service<PluginHostEnv>
): HostHandler => {
  const granted = new Set(pin.capabilities.host_functions)
  const prefix = pin.capabilities.kv_prefix
  const counters = new Set(pin.capabilities.counters ?? [])
  const publishPrefix = pin.capabilities.publish_prefix
  // The clock answers synchronously (in-process plugins need that); KV and counters may not.
  return (fn, arg) => {
    switch (fn) {
      case "wk_now":
        return granted.has("clock") ? { value: call.now } : { fault: "clock is not granted" }
      case "wk_kv_get": {
        if (!granted.has("kv") || prefix === undefined) return { fault: "kv is not granted" }
        if (typeof arg !== "string" || !arg.startsWith(prefix)) return { fault: `key ${JSON.stringify(arg)} is outside the granted prefix '${prefix}'` }
        return Effect.runPromise(env.kvGet(arg)).then((value) => ({ value }))
      }
      case "wk_counter": {
        if (!granted.has("counter")) return { fault: "counter is not granted" }
        if (typeof arg !== "string" || !counters.has(arg)) return { fault: `counter ${JSON.stringify(arg)} is not granted` }
        return Effect.runPromise(env.counter(arg, call.principal)).then((value) => ({ value }))
      }
      case "wk_publish": {
        const pub = publishPrefix
        if (!granted.has("publish") || pub === undefined) return { fault: "publish is not granted" }
        const o: { readonly [k: string]: JsonValue } = typeof arg === "object" && arg !== null && !Array.isArray(arg) ? (arg as { readonly [k: string]: JsonValue }) : {}
        const subject = o["subject"], data = o["data"]
        if (typeof subject !== "string" || typeof data !== "string") return { fault: "publish takes a subject and a text message" }
        if (!subject.startsWith(pub) || subject.length === pub.length || !PublishSubject.test(subject)) return { fault: `subject ${JSON.stringify(subject)} is outside the granted prefix '${pub}'` }
        if (data.length > MaxPublishChars) return { fault: `message of ${data.length} chars is over ${MaxPublishChars}` }
        // Answered at once (in-process plugins need a synchronous answer); delivery is the sink's.
        Effect.runFork(env.publish(subject, data).pipe(Effect.catchAllCause(() => Effect.void)))
        return { value: null }
      }
      default:
        return { fault: `unknown host function ${fn}` }
    }
  }
}

/** Serves host functions from a recorded list, in order: how an auditor re-runs a decision. */
export const replayHostHandler = (recorded: ReadonlyArray<HostValue>): HostHandler => {
  let next = 0
  return (fn, arg) => {
    const r = recorded[next++]
    if (r === undefined) return { fault: `re-run made host call #${next} (${fn}) that was not recorded` }
    if (r.fn !== fn || JSON.stringify(r.arg) !== JSON.stringify(arg)) return { fault: `re-run diverged at host call #${next}: recorded ${r.fn}(${JSON.stringify(r.arg)}), got ${fn}(${JSON.stringify(arg)})` }
    return r.fault !== undefined ? { fault: r.fault } : { value: r.value ?? null }
  }
}
