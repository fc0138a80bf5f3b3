import type { CallContext } from "@extism/extism"
import type { JsonValue } from "../../schema/Json.js"

/** Outcome statuses, by their index in a worker's result record. See pluginImports.mjs. */
export declare const StatusNames: readonly ["ok", "trap", "memory_limit", "plugin_error", "no_output", "host_fault", "too_large", "timeout"]
export type FaultStatus = "timeout" | "host_fault" | "memory_limit" | "trap"

export declare class HostFault extends Error {}
export declare class MemoryLimit extends Error {}

/** What the host functions record during one call. */
export interface CallState {
  allocated: number
  error: string | null
  memoryExceeded: boolean
  logs: Array<string>
}
export declare const callState: () => CallState

type HostFunction = (ctx: CallContext, ...args: Array<bigint>) => unknown
export declare const hostImports: (options: {
  readonly granted: ReadonlySet<string>
  readonly memoryMaxPages: number
  readonly state: () => CallState
  readonly hostCall: (fn: string, arg: JsonValue) => JsonValue
}) => { readonly env: Record<string, HostFunction>; readonly user: Record<string, HostFunction> }

export declare const faultOf: (options: {
  readonly error: unknown
  readonly outOfFuel: boolean
  readonly budget: bigint
  readonly timeoutMs: number
  readonly state: CallState
  readonly memoryPages: number
  readonly memoryMaxPages: number
}) => { readonly status: FaultStatus; readonly text: string }
