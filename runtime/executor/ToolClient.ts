import { Effect } from "effect"
import { ToolClient } from "../ledger/ToolClient.js"

/** `wk.v1.tools.<tool>.invoke` with the idempotency key (ledger/ToolClient.ts). */
export const invokeTool = (tool: string, heldId: string, idempotencyKey: string, args: unknown, timeoutMs: number) =>
  Effect.flatMap(ToolClient, (c) => c.invoke({ tool, heldId, idempotencyKey, args }, timeoutMs))

/** `wk.v1.tools.<tool>.readback`: did the effect under this key happen? */
export const readbackTool = (tool: string, idempotencyKey: string, timeoutMs: number) => Effect.flatMap(ToolClient, (c) => c.readback(tool, idempotencyKey, timeoutMs))
