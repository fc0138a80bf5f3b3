// Needs a witness when today's spend plus this amount would pass the principal's daily cap.
// The cap is read from KV (`limits/daily/<principal>`) or the config's default; spend so far
// from the kernel counter `spent_today`. No opinion otherwise: it only ever narrows.
//   config: { "tools": ["payments.transfer"], "amount_field": "amount", "default_cap": 1000 }
import { runAdjudicate, AdjudicateInput, Opinion, counter, kvGet, numberText, parse } from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

function decide(input: AdjudicateInput): Opinion {
  const tools = input.config.getArr("tools")
  let covered = false
  for (let i = 0; i < tools.length; i++) {
    const t = tools.at(i)
    if (t.isStr() && t.asStr().value == input.proposal.tool) covered = true
  }
  if (!covered) return Opinion.defer()
  const amount = input.proposal.args.getNum(input.config.getStr("amount_field", "amount"), NaN)
  if (!isFinite(amount) || amount < 0) return Opinion.defer()
  let cap = input.config.getNum("default_cap", 0)
  const stored = kvGet("limits/daily/" + input.proposal.principal)
  if (stored !== null) {
    const v = parse(stored)
    if (v !== null && v.isNum()) cap = v.asNum().value
  }
  const spent = counter("spent_today")
  if (spent + amount > cap) {
    return Opinion.witness("daily spend " + numberText(spent) + " + " + numberText(amount) + " would pass the daily cap " + numberText(cap))
  }
  return Opinion.defer()
}
