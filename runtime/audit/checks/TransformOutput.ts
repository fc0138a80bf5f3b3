import { callDigest, canonicalize } from "../../schema/Canonical.js"
import type { HeldEvent } from "../../schema/Events.js"
import { collector, type HeldCheck } from "./Check.js"

type Adjudicated = Extract<HeldEvent, { type: "call.adjudicated" }>

/** The replacement a transform decision recorded (`{"action": "replace", "tool", "args"}`), if it is one. */
const replacementOf = (output: unknown): { readonly tool: string; readonly args: unknown } | undefined => {
  if (typeof output !== "object" || output === null || !("action" in output) || output.action !== "replace") return undefined
  const o = output as { readonly tool?: unknown; readonly args?: unknown }
  return typeof o.tool === "string" ? { tool: o.tool, args: o.args } : undefined
}

/**
 * `transform-output`: the call a verdict says will run (`executed`) is what the record shows:
 * its `call_digest` is sha256(JCS({tool, args})) of it, and a call other than the generation's
 * proposal is the output of the last replacing transform decision recorded with the verdict.
 * (`plugin-rerun` re-derives those decisions from the pinned wasm; this ties the executed call to them.)
 */
export const transformOutput: HeldCheck = {
  name: "transform-output",
  run: (call) => {
    const c = collector("transform-output", call.heldId)
    const proposals = new Map<number, { readonly tool: string; readonly args: unknown }>()
    for (const { seq, event } of call.steps) {
      if (event.type === "call.proposed") proposals.set(event.generation, { tool: event.tool, args: event.args })
      if (event.type !== "call.adjudicated" || event.executed === undefined) continue
      c.count()
      const e: NonNullable<Adjudicated["executed"]> = event.executed
      if (e.call_digest !== callDigest(e.tool, e.args)) {
        c.fail([seq], `the executed call's call_digest is not sha256(JCS({tool, args})) of ${e.tool}`)
        continue
      }
      const proposed = proposals.get(event.generation)
      if (proposed !== undefined && proposed.tool === e.tool && canonicalize(proposed.args) === canonicalize(e.args)) continue
      const replacements = event.decisions.map((d) => replacementOf(d.output)).filter((r) => r !== undefined)
      const last = replacements[replacements.length - 1]
      if (last === undefined) c.fail([seq], `the executed call (${e.tool}) is not the proposal, and no recorded transform decision replaced it`)
      else if (last.tool !== e.tool || canonicalize(last.args) !== canonicalize(e.args)) c.fail([seq], `the executed call (${e.tool}) is not the output of the last recorded transform decision (${last.tool})`)
    }
    return c.done()
  }
}
