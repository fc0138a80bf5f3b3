import { Context, Effect, Layer } from "effect"
import { NoResponders, ToolClient, type InvokeReply, type ReadbackReply, type ToolInvoke, type ToolUnanswered } from "../ToolClient.js"

/**
 * A tool as a test serves it: functions standing for the tool service. Failing with
 * `ToolUnanswered` is a lost reply (the tool may have acted), with `NoResponders` a tool that is
 * down; a missing `readback` is a tool without one (no responders).
 */
export interface MemoryTool {
  readonly invoke: (request: ToolInvoke) => Effect.Effect<InvokeReply, ToolUnanswered | NoResponders>
  readonly readback?: (idempotencyKey: string) => Effect.Effect<ReadbackReply, ToolUnanswered | NoResponders>
}

/** The table of tools a test serves; a tool not in it answers no-responders. */
export class MemoryTools extends Context.Tag("wk/MemoryTools")<
  MemoryTools,
  {
    readonly serve: (tool: string, served: MemoryTool) => void
    /** Takes the tool down: its requests reach no one. */
    readonly stop: (tool: string) => void
  }
>() {}

/** The tool client over the table. */
export const makeMemoryToolClient = Effect.sync(() => {
  const tools = new Map<string, MemoryTool>()
  const port = ToolClient.of({
    invoke: (request) => {
      const t = tools.get(request.tool)
      return t === undefined ? Effect.fail(new NoResponders({ tool: request.tool })) : t.invoke(request)
    },
    readback: (tool, key) => {
      const rb = tools.get(tool)?.readback
      return rb === undefined ? Effect.fail(new NoResponders({ tool })) : rb(key)
    }
  })
  return Context.make(ToolClient, port).pipe(Context.add(MemoryTools, { serve: (tool, served) => void tools.set(tool, served), stop: (tool) => void tools.delete(tool) }))
})

export const layerMemoryToolClient = Layer.effectContext(makeMemoryToolClient)
