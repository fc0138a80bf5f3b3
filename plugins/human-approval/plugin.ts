// Witness contract: human approval, with a presentation that honours the disclosure preference.
// `exact`: the approver sees the exact arguments, and only a local approver (on the org's own
// devices) may approve. `redacted`: the approver sees a summary with every value masked except
// `keep_fields`, and a local or a remote approver (e.g. a phone push through a third party) may
// approve. No preference: `default_disclosure` (default "redacted", the private choice).
//   config: { "tools"?: ["money_transfer", "delete_*"], "local_class"?: "human", "remote_class"?: "human-remote",
//             "default_disclosure"?: "redacted", "keep_fields"?: ["amount"], "fallback_after_ms"?: 600000 }
import {
  runWitnessContract, WitnessContractInput, ContractOffer, Presentation, JArr, JObj, JStr, JValue, numberText, stringList, toolMatches
} from "../../plugin-sdk/assembly/index"

export function witness_contract(): i32 {
  return runWitnessContract(offer)
}

function offer(input: WitnessContractInput): ContractOffer {
  const tools = stringList(input.config.getArr("tools"))
  if (tools.length > 0 && !toolMatches(tools, input.proposal.tool)) return ContractOffer.none()
  let disclosure = input.disclosure
  if (disclosure != "exact" && disclosure != "redacted") disclosure = input.config.getStr("default_disclosure", "redacted")
  if (disclosure != "exact") disclosure = "redacted"
  const local = new JObj().setStr("class", input.config.getStr("local_class", "human"))
  const p = input.proposal
  let rule: JObj
  let summary: string
  let args: JObj
  if (disclosure == "exact") {
    rule = local
    args = p.args
    summary = p.tool + " " + p.args.stringify() + " proposed by " + p.principal
  } else {
    const remote = new JObj().setStr("class", input.config.getStr("remote_class", "human-remote"))
    rule = new JObj().set("any", new JArr().push(local).push(remote))
    const keep = stringList(input.config.getArr("keep_fields"))
    args = redact(p.args, keep).asObj()
    summary = p.tool + " proposed by " + p.principal + " (" + describe(p.args, keep) + "; other values redacted)"
  }
  const contract = new JObj().set("rule", rule).setStr("summary", summary)
  const after = input.config.getNum("fallback_after_ms", NaN)
  if (isFinite(after) && after >= 1) contract.set("fallback", new JObj().setNum("after_ms", Math.floor(after)).setStr("action", "deny"))
  return ContractOffer.of(contract, "human approval (" + disclosure + " disclosure)").presenting(Presentation.of(disclosure, summary, args))
}

/** Every value masked by its kind; keys and `keep` fields at the top level stay. */
function redact(v: JValue, keep: Array<string>, top: bool = true): JValue {
  if (v.isObj()) {
    const o = v.asObj()
    const out = new JObj()
    for (let i = 0; i < o.keys.length; i++) out.set(o.keys[i], top && keep.includes(o.keys[i]) ? o.values[i] : redact(o.values[i], keep, false))
    return out
  }
  if (v.isArr()) return new JStr("[redacted list of " + v.asArr().length.toString() + "]")
  if (v.isStr()) return new JStr("[redacted text]")
  if (v.isNum()) return new JStr("[redacted number]")
  if (v.isBool()) return new JStr("[redacted flag]")
  return v
}

/** `amount 5000, to, from` : kept fields with values, the others by name only. */
function describe(args: JObj, keep: Array<string>): string {
  const parts = new Array<string>()
  for (let i = 0; i < args.keys.length; i++) {
    const k = args.keys[i]
    const v = args.values[i]
    if (keep.includes(k) && v.isNum()) parts.push(k + " " + numberText(v.asNum().value))
    else if (keep.includes(k) && v.isStr()) parts.push(k + " " + v.asStr().value)
    else parts.push(k)
  }
  return parts.length > 0 ? "fields: " + parts.join(", ") : "no arguments"
}
