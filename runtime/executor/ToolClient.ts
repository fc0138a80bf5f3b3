import { Effect } from "effect"
import { ToolClient } from "../ledger/ToolClient.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { toolServiceClass } from "../schema/ToolReplySignature.js"

/**
 * The keys of `tool`'s registered service identity under `policy`: every key of a principal
 * registered with class `tool:<tool>`. Empty when none is registered (the tool's NATS user is then
 * its only identity).
 */
export const toolServiceKeys = (policy: ActivePolicy, tool: string): ReadonlyArray<string> => {
  const cls = toolServiceClass(tool)
  return [...policy.principals.values()].filter((p) => p.classes.includes(cls)).flatMap((p) => p.keys)
}

/** `wk.v1.tools.<tool>.invoke` with the idempotency key (ledger/ToolClient.ts). */
export const invokeTool = (tool: string, heldId: string, idempotencyKey: string, args: unknown, timeoutMs: number, serviceKeys: ReadonlyArray<string> = []) =>
  Effect.flatMap(ToolClient, (c) => c.invoke({ tool, heldId, idempotencyKey, args, serviceKeys }, timeoutMs))

/** `wk.v1.tools.<tool>.readback`: did the effect under this key happen? Only the registered service's signed answer counts. */
export const readbackTool = (tool: string, idempotencyKey: string, timeoutMs: number, serviceKeys: ReadonlyArray<string> = []) =>
  Effect.flatMap(ToolClient, (c) => c.readback(tool, idempotencyKey, timeoutMs, serviceKeys))
