// The spine's rule adjudicator as a plugin: per-tool amount thresholds from the pin's config.
//   config: { "rules": { "<tool>": { "amount_field"?, "witness_above"?, "deny_above"?,
//             "always_witness"?, "contract"? } }, "unknown_tools"?: "allow" | "defer" }
// A tool without a rule is allowed (the grant floor already applied), as in RuleAdjudicator.ts.
import { runAdjudicate, AdjudicateInput, Opinion, numberText } from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

function decide(input: AdjudicateInput): Opinion {
  const r = input.config.getObj("rules").get(input.proposal.tool)
  if (r === null || !r.isObj()) return input.config.getStr("unknown_tools", "allow") == "defer" ? Opinion.defer() : Opinion.allow()
  const rule = r.asObj()
  let amount: f64 = 0
  if (rule.has("amount_field")) {
    const field = rule.getStr("amount_field")
    const raw = input.proposal.args.get(field)
    if (raw === null || !raw.isNum() || !isFinite(raw.asNum().value) || raw.asNum().value < 0) {
      return Opinion.deny("argument '" + field + "' must be a non-negative number")
    }
    amount = raw.asNum().value
  }
  if (rule.has("deny_above") && amount > rule.getNum("deny_above")) {
    return Opinion.deny("amount " + numberText(amount) + " is over the hard cap " + numberText(rule.getNum("deny_above")))
  }
  const always = rule.getBool("always_witness")
  if (always || (rule.has("witness_above") && amount > rule.getNum("witness_above"))) {
    const why = always ? "tool always needs a witness" : "amount " + numberText(amount) + " is over the witness threshold " + numberText(rule.getNum("witness_above"))
    const c = rule.get("contract")
    return Opinion.witness(why, c !== null && c.isObj() ? c.asObj() : null)
  }
  return Opinion.allow()
}
