// Spend limits for money movement: allow under a threshold, witness above it, deny over a hard
// cap; the same three bands for the day's total, with "spent today" read from the kernel
// counter `spent_today` (capability `counter`), so one large transfer cannot be split into many
// small ones that each pass. Unlike spend-limit it never allows a tool it does not cover.
//   config: { "tools"?: ["money_transfer"], "amount_field"?: "amount",
//             "witness_above": 1000, "deny_above": 100000,
//             "daily_witness_above"?: 5000, "daily_deny_above"?: 200000, "contract"?: WitnessContract }
import { runAdjudicate, AdjudicateInput, Opinion, counter, numberText, stringList, toolMatches } from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

function decide(input: AdjudicateInput): Opinion {
  const defaults = new Array<string>()
  defaults.push("money_transfer")
  if (!toolMatches(stringList(input.config.getArr("tools"), defaults), input.proposal.tool)) return Opinion.defer()
  const field = input.config.getStr("amount_field", "amount")
  const raw = input.proposal.args.get(field)
  if (raw === null || !raw.isNum() || !isFinite(raw.asNum().value) || raw.asNum().value < 0) return Opinion.deny("argument '" + field + "' must be a non-negative number")
  const amount = raw.asNum().value
  const cfg = input.config
  if (cfg.has("deny_above") && amount > cfg.getNum("deny_above")) return Opinion.deny("amount " + numberText(amount) + " is over the hard cap " + numberText(cfg.getNum("deny_above")))
  const spent = counter("spent_today")
  if (!isFinite(spent) || spent < 0) return Opinion.deny("spent_today is not a valid amount")
  const total = spent + amount
  if (cfg.has("daily_deny_above") && total > cfg.getNum("daily_deny_above")) {
    return Opinion.deny("spent today " + numberText(spent) + " + " + numberText(amount) + " is over the daily hard cap " + numberText(cfg.getNum("daily_deny_above")))
  }
  const c = cfg.get("contract")
  const contract = c !== null && c.isObj() ? c.asObj() : null
  if (cfg.has("witness_above") && amount > cfg.getNum("witness_above")) {
    return Opinion.witness("amount " + numberText(amount) + " is over the witness threshold " + numberText(cfg.getNum("witness_above")), contract)
  }
  if (cfg.has("daily_witness_above") && total > cfg.getNum("daily_witness_above")) {
    return Opinion.witness("spent today " + numberText(spent) + " + " + numberText(amount) + " is over the daily witness threshold " + numberText(cfg.getNum("daily_witness_above")), contract)
  }
  return Opinion.allow("amount " + numberText(amount) + " within limits (spent today " + numberText(spent) + ")")
}
