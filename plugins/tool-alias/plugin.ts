// Canonicalizes tool names: a call to an alias becomes a call to the real tool, same args.
//   config: { "aliases": { "pay": "payments.transfer" } }
import { runTransform, TransformInput, Rewrite } from "../../plugin-sdk/assembly/index"

export function transform(): i32 {
  return runTransform(rewrite)
}

function rewrite(input: TransformInput): Rewrite {
  const target = input.config.getObj("aliases").get(input.proposal.tool)
  if (target === null || !target.isStr()) return Rewrite.keep()
  const tool = target.asStr().value
  return Rewrite.replaceWith(tool, input.proposal.args, "alias " + input.proposal.tool + " -> " + tool)
}
