// Destructive-to-preview. Transform: a `delete_*` call that does not say `dry_run` becomes its
// dry run (`dry_run: true`), so the default is to see what would go. Adjudicate: a delete that
// says `dry_run: false` really deletes, so it needs a witness; a non-boolean flag is denied.
//   config: { "prefix"?: "delete_", "preview_field"?: "dry_run", "contract"?: WitnessContract }
import { runAdjudicate, runTransform, AdjudicateInput, TransformInput, Opinion, Rewrite, JBool, JObj } from "../../plugin-sdk/assembly/index"

export function transform(): i32 {
  return runTransform(preview)
}

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

function preview(input: TransformInput): Rewrite {
  if (!input.proposal.tool.startsWith(input.config.getStr("prefix", "delete_"))) return Rewrite.keep()
  const field = input.config.getStr("preview_field", "dry_run")
  const args = input.proposal.args
  if (args.has(field)) return Rewrite.keep()
  const next = new JObj()
  for (let i = 0; i < args.keys.length; i++) next.set(args.keys[i], args.values[i])
  next.set(field, new JBool(true))
  return Rewrite.replaceWith(input.proposal.tool, next, input.proposal.tool + " runs as its dry run; propose " + field + ": false to delete (needs a witness)", "rewrite")
}

function decide(input: AdjudicateInput): Opinion {
  if (!input.proposal.tool.startsWith(input.config.getStr("prefix", "delete_"))) return Opinion.defer()
  const field = input.config.getStr("preview_field", "dry_run")
  const flag = input.proposal.args.get(field)
  if (flag === null) return Opinion.defer() // the transform adds it; without the transform, no opinion
  if (!flag.isBool()) return Opinion.deny("argument '" + field + "' must be true or false")
  if (flag.asBool().value) return Opinion.defer()
  const c = input.config.get("contract")
  return Opinion.witness(input.proposal.tool + " with " + field + ": false deletes for real", c !== null && c.isObj() ? c.asObj() : null)
}
