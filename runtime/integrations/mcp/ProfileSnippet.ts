import type { Profile } from "../../schema/Profile.js"
import type { ListedTool } from "./ToolCatalog.js"

/**
 * The profile fragment a set of upstream tools suggests from their annotations: every tool is
 * granted to `principal`; a read-only tool is allowed and may be re-sent (`idempotent`); any
 * other tool (MCP's default is destructive) always needs a witness of `witnessClass`, and,
 * unless declared idempotent, has no read-back (`readback: false`), so an unknown outcome goes
 * to a witness instead of being retried blindly. Review it before applying: it is a default.
 */
export const profileFor = (name: string, principal: string, tools: ReadonlyArray<ListedTool>, witnessClass = "human"): Profile => ({
  name,
  layer: "organization",
  grants: { [principal]: tools.map((t) => t.name) },
  rules: Object.fromEntries(
    tools.map((t) => [
      t.name,
      t.hints.readOnly
        ? { idempotent: true }
        : { always_witness: true, contract: { rule: { class: witnessClass } }, ...(t.hints.idempotent ? { idempotent: true } : { readback: false }) }
    ])
  )
})
