// Transform: removes forbidden fields (at any depth, names compared case-insensitively) from
// the arguments before anything else sees them, so a secret the model put in a call never
// reaches the tool, the log or a witness.
//   config: { "fields": ["password", "ssn"], "tools"?: ["crm_update", "notes_*"] }  (no tools: every tool)
import { runTransform, TransformInput, Rewrite, JArr, JObj, JValue, stringList, toolMatches } from "../../plugin-sdk/assembly/index"

export function transform(): i32 {
  return runTransform(rewrite)
}

function rewrite(input: TransformInput): Rewrite {
  const tools = stringList(input.config.getArr("tools"))
  if (tools.length > 0 && !toolMatches(tools, input.proposal.tool)) return Rewrite.keep()
  const forbidden = stringList(input.config.getArr("fields"))
  for (let i = 0; i < forbidden.length; i++) forbidden[i] = forbidden[i].toLowerCase()
  const removed = new Array<string>()
  const stripped = strip(input.proposal.args, forbidden, removed)
  if (removed.length == 0) return Rewrite.keep()
  return Rewrite.replaceWith(input.proposal.tool, stripped.asObj(), "removed forbidden fields: " + removed.join(", "), "rewrite")
}

function strip(v: JValue, forbidden: Array<string>, removed: Array<string>): JValue {
  if (v.isObj()) {
    const o = v.asObj()
    const out = new JObj()
    for (let i = 0; i < o.keys.length; i++) {
      const k = o.keys[i]
      if (forbidden.includes(k.toLowerCase())) {
        if (!removed.includes(k)) removed.push(k)
        continue
      }
      out.set(k, strip(o.values[i], forbidden, removed))
    }
    return out
  }
  if (v.isArr()) {
    const a = v.asArr()
    const out = new JArr()
    for (let i = 0; i < a.items.length; i++) out.push(strip(a.items[i], forbidden, removed))
    return out
  }
  return v
}
