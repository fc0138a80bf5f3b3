// Write scope: a write whose (canonical) path is outside the workspace needs a witness; inside,
// no opinion. Paths are canonicalized here too, so `ws/../etc/passwd` cannot pass as inside
// even without the path-canon transform. A NUL byte or a non-string path is denied.
//   config: { "workspace": "/ws", "tools": { "fs_write": ["path"], "fs_move": ["from", "to"] }, "contract"?: WitnessContract }
import { runAdjudicate, AdjudicateInput, Opinion, canonicalPath } from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

function decide(input: AdjudicateInput): Opinion {
  const spec = input.config.getObj("tools").get(input.proposal.tool)
  if (spec === null || !spec.isArr()) return Opinion.defer()
  const workspace = input.config.getStr("workspace", "/")
  const fields = spec.asArr()
  const outside = new Array<string>()
  for (let i = 0; i < fields.length; i++) {
    if (!fields.at(i).isStr()) continue
    const field = fields.at(i).asStr().value
    const v = input.proposal.args.get(field)
    if (v === null) continue
    if (!v.isStr()) return Opinion.deny("argument '" + field + "' must be a path string")
    const c = canonicalPath(workspace, v.asStr().value)
    if (!c.ok) return Opinion.deny("argument '" + field + "': " + c.error)
    if (!c.inside) outside.push(field + " = " + c.path)
  }
  if (outside.length == 0) return Opinion.defer()
  const c = input.config.get("contract")
  return Opinion.witness("write outside the workspace " + workspace + ": " + outside.join(", "), c !== null && c.isObj() ? c.asObj() : null)
}
