// Wrappers for the kernel's host functions. A plugin is linked only with the functions its
// profile grants: importing one that is not granted makes the plugin refuse to load, and
// AssemblyScript imports a function only when the plugin actually calls its wrapper.
import { Host, Memory } from "@extism/as-pdk"

@external("extism:host/env", "length")
declare function extism_length(offset: u64): u64

@external("extism:host/env", "error_set")
declare function extism_error_set(offset: u64): void

@external("extism:host/user", "wk_log")
declare function wk_log(message: u64): void

@external("extism:host/user", "wk_now")
declare function wk_now(): i64

@external("extism:host/user", "wk_kv_get")
declare function wk_kv_get(key: u64): u64

@external("extism:host/user", "wk_counter")
declare function wk_counter(name: u64): f64

function readBlock(offset: u64): string | null {
  if (offset == 0) return null
  return new Memory(offset, extism_length(offset)).toString()
}

/** Writes a line to the kernel log (capability `log`). */
export function log(message: string): void {
  wk_log(Memory.allocateString(message).offset)
}

/** The kernel clock of this call, ms since the epoch (capability `clock`). Never the wall clock. */
export function now(): i64 {
  return wk_now()
}

/**
 * Reads a key of the KV prefix the profile grants (capability `kv`). Null when absent.
 * A key outside the granted prefix is a plugin fault (the call fails closed).
 */
export function kvGet(key: string): string | null {
  return readBlock(wk_kv_get(Memory.allocateString(key).offset))
}

/** Reads a named counter for the calling principal, e.g. "spent_today" (capability `counter`). */
export function counter(name: string): f64 {
  return wk_counter(Memory.allocateString(name).offset)
}

@external("extism:host/user", "wk_publish")
declare function wk_publish(subject: u64, message: u64): void

/**
 * Publishes a text message on a NATS subject under the pin's `publish_prefix` (capability
 * `publish`, egress `external`). Fire and forget; a subject outside the prefix is a fault.
 */
export function publish(subject: string, message: string): void {
  wk_publish(Memory.allocateString(subject).offset, Memory.allocateString(message).offset)
}

/** Writes UTF-8 output (as-pdk's outputString sizes by UTF-16 length; this does not). */
export function outputText(text: string): void {
  Host.output(Uint8Array.wrap(String.UTF8.encode(text)))
}

/** Records an error message for the kernel; the stage then returns non-zero. */
export function setError(message: string): void {
  extism_error_set(Memory.allocateString(message).offset)
}

/** The abort handler every SDK plugin is built with: report the message, then trap. */
export function sdkAbort(message: string | null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  const text = (message === null ? "abort" : message) + " at " + (fileName === null ? "?" : fileName) + ":" + line.toString() + ":" + column.toString()
  setError(text)
  unreachable()
}
