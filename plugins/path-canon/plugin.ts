// Transform: canonicalizes path arguments against the workspace, so policy and witnesses see the
// one path the tool will touch: `docs/../x//y` -> `/ws/x/y`. Rejects a NUL byte, an empty path,
// and (unless the tool allows it) a path outside the workspace.
//   config: { "workspace": "/ws", "tools": { "fs_read": { "fields": ["path"], "allow_outside"?: false } } }
import { runTransform, TransformInput, Rewrite, JObj, JStr, canonicalPath } from "../../plugin-sdk/assembly/index"

export function transform(): i32 {
  return runTransform(rewrite)
}

function rewrite(input: TransformInput): Rewrite {
  const spec = input.config.getObj("tools").get(input.proposal.tool)
  if (spec === null || !spec.isObj()) return Rewrite.keep()
  const workspace = input.config.getStr("workspace", "/")
  const allowOutside = spec.asObj().getBool("allow_outside")
  const fields = spec.asObj().getArr("fields")
  const args = input.proposal.args
  const next = new JObj()
  for (let i = 0; i < args.keys.length; i++) next.set(args.keys[i], args.values[i])
  const changed = new Array<string>()
  for (let i = 0; i < fields.length; i++) {
    if (!fields.at(i).isStr()) continue
    const field = fields.at(i).asStr().value
    const v = args.get(field)
    if (v === null) continue
    if (!v.isStr()) return Rewrite.reject("argument '" + field + "' must be a path string")
    const c = canonicalPath(workspace, v.asStr().value)
    if (!c.ok) return Rewrite.reject("argument '" + field + "': " + c.error)
    if (!c.inside && !allowOutside) return Rewrite.reject("argument '" + field + "' resolves to " + c.path + ", outside the workspace " + workspace)
    if (c.path != v.asStr().value) {
      next.set(field, new JStr(c.path))
      changed.push(field)
    }
  }
  if (changed.length == 0) return Rewrite.keep()
  return Rewrite.canonicalize(input.proposal.tool, next, "canonical path for " + changed.join(", "))
}
