// Typed stage entry points. The kernel calls the export named after the stage with the stage
// input as JCS JSON; the plugin answers with one JSON object (shapes in plugin-sdk/README.md).
import { Host } from "@extism/as-pdk"
import { JArr, JNull, JObj, JValue, parse } from "./json"
import { outputText, setError } from "./host"

/** The proposed tool call as adjudicators and transforms see it. */
export class Proposal {
  principal: string = ""
  session_id: string = ""
  turn_id: string = ""
  call_id: string = ""
  tool: string = ""
  args: JObj = new JObj()

  static from(o: JObj): Proposal {
    const p = new Proposal()
    p.principal = o.getStr("principal")
    p.session_id = o.getStr("session_id")
    p.turn_id = o.getStr("turn_id")
    p.call_id = o.getStr("call_id")
    p.tool = o.getStr("tool")
    p.args = o.getObj("args")
    return p
  }
}

/** Fields every stage input carries. */
export class StageInput {
  /** The whole input object, for fields this SDK version does not model. */
  raw: JObj = new JObj()
  stage: string = ""
  /** This plugin's `config` from its pin in the profile. */
  config: JObj = new JObj()
  /** Kernel clock for this call, ms since the epoch. */
  now: i64 = 0

  protected fill(o: JObj): void {
    this.raw = o
    this.stage = o.getStr("stage")
    this.config = o.getObj("config")
    this.now = <i64>o.getNum("now", 0)
  }
}

export class TransformInput extends StageInput {
  proposal: Proposal = new Proposal()
  /** How many transforms already applied to reach this proposal. */
  depth: i32 = 0
  static from(o: JObj): TransformInput {
    const i = new TransformInput()
    i.fill(o)
    i.proposal = Proposal.from(o.getObj("proposal"))
    i.depth = <i32>o.getNum("depth", 0)
    return i
  }
}

export class AdjudicateInput extends StageInput {
  proposal: Proposal = new Proposal()
  static from(o: JObj): AdjudicateInput {
    const i = new AdjudicateInput()
    i.fill(o)
    i.proposal = Proposal.from(o.getObj("proposal"))
    return i
  }
}

export class WitnessContractInput extends StageInput {
  proposal: Proposal = new Proposal()
  /** The reasons (`{by, reason}`) the adjudicators gave for requiring a witness. */
  reasons: JArr = new JArr()
  /** The call's disclosure preference: "exact", "redacted", or "" when nobody set one. */
  disclosure: string = ""
  static from(o: JObj): WitnessContractInput {
    const i = new WitnessContractInput()
    i.fill(o)
    i.proposal = Proposal.from(o.getObj("proposal"))
    i.reasons = o.getArr("reasons")
    i.disclosure = o.getStr("disclosure")
    return i
  }
}

export class AdmitInput extends StageInput {
  principal: string = ""
  tool: string = ""
  args: JValue = new JNull()
  /** The tool's result, before any model sees it. */
  result: JValue = new JNull()
  static from(o: JObj): AdmitInput {
    const i = new AdmitInput()
    i.fill(o)
    i.principal = o.getStr("principal")
    i.tool = o.getStr("tool")
    const a = o.get("args")
    if (a !== null) i.args = a
    const r = o.get("result")
    if (r !== null) i.result = r
    return i
  }
}

export class ObserveInput extends StageInput {
  /** "adjudicated" or "admitted" / "quarantined". */
  event: string = ""
  static from(o: JObj): ObserveInput {
    const i = new ObserveInput()
    i.fill(o)
    i.event = o.getStr("event")
    return i
  }
}

/** An adjudicator's answer: ALLOW, REQUIRE_WITNESS (optionally with a contract), DENY or DEFER. */
export class Opinion {
  constructor(public verdict: string, public reason: string, public contract: JObj | null) {}
  static allow(reason: string = ""): Opinion { return new Opinion("ALLOW", reason, null) }
  static deny(reason: string): Opinion { return new Opinion("DENY", reason, null) }
  static witness(reason: string, contract: JObj | null = null): Opinion { return new Opinion("REQUIRE_WITNESS", reason, contract) }
  /** No opinion: the other adjudicators (or the floor) decide. */
  static defer(): Opinion { return new Opinion("DEFER", "", null) }
  toJson(): JObj {
    const o = new JObj().setStr("verdict", this.verdict)
    if (this.reason.length > 0) o.setStr("reason", this.reason)
    const c = this.contract
    if (c !== null) o.set("contract", c)
    return o
  }
}

/**
 * A transform's answer: keep the call, replace it (the kernel re-adjudicates from the start), or
 * reject it (denied with the reason). A replacement's `kind` is "canonicalize" (same meaning,
 * normal form: preferences may auto-apply it), "rewrite", or "" (unstated, read as a rewrite).
 */
export class Rewrite {
  constructor(public action: string, public tool: string, public args: JObj, public reason: string, public kind: string = "") {}
  static keep(): Rewrite { return new Rewrite("keep", "", new JObj(), "") }
  static replaceWith(tool: string, args: JObj, reason: string, kind: string = ""): Rewrite { return new Rewrite("replace", tool, args, reason, kind) }
  static canonicalize(tool: string, args: JObj, reason: string): Rewrite { return new Rewrite("replace", tool, args, reason, "canonicalize") }
  static reject(reason: string): Rewrite { return new Rewrite("reject", "", new JObj(), reason) }
  toJson(): JObj {
    if (this.action == "keep") return new JObj().setStr("action", "keep")
    if (this.action == "reject") return new JObj().setStr("action", "reject").setStr("reason", this.reason)
    const o = new JObj().setStr("action", "replace").setStr("tool", this.tool).set("args", this.args).setStr("reason", this.reason)
    if (this.kind.length > 0) o.setStr("kind", this.kind)
    return o
  }
}

/**
 * A witness-contract provider's answer: a contract to join (with `all`), or none; optionally a
 * presentation (`{disclosure, summary?, args?}`, see `Presentation`) for what witnesses are shown.
 */
export class ContractOffer {
  presentation: JObj | null = null
  constructor(public contract: JObj | null, public reason: string) {}
  static none(): ContractOffer { return new ContractOffer(null, "") }
  static of(contract: JObj, reason: string = ""): ContractOffer { return new ContractOffer(contract, reason) }
  presenting(presentation: JObj): ContractOffer { this.presentation = presentation; return this }
  toJson(): JObj {
    const o = new JObj()
    const c = this.contract
    o.set("contract", c === null ? new JNull() : c)
    if (this.reason.length > 0) o.setStr("reason", this.reason)
    const p = this.presentation
    if (p !== null) o.set("presentation", p)
    return o
  }
}

/** Builds a witness presentation: "exact" with the call's args, or "redacted" with masked args. */
export class Presentation {
  static of(disclosure: string, summary: string, args: JObj | null): JObj {
    const p = new JObj().setStr("disclosure", disclosure)
    if (summary.length > 0) p.setStr("summary", summary)
    if (args !== null) p.set("args", args)
    return p
  }
}

/** A result-admission answer: ADMIT, QUARANTINE (bytes never reach the model) or DEFER. */
export class Admission {
  constructor(public verdict: string, public reason: string) {}
  static admit(): Admission { return new Admission("ADMIT", "") }
  static quarantine(reason: string): Admission { return new Admission("QUARANTINE", reason) }
  static defer(): Admission { return new Admission("DEFER", "") }
  toJson(): JObj {
    const o = new JObj().setStr("verdict", this.verdict)
    if (this.reason.length > 0) o.setStr("reason", this.reason)
    return o
  }
}

/** Witness-contract builders: `{rule: {class, count}}` and friends. */
export class Contract {
  static ofClass(cls: string, count: i32 = 1, summary: string = ""): JObj {
    const rule = new JObj().setStr("class", cls)
    if (count > 1) rule.setNum("count", <f64>count)
    const c = new JObj().set("rule", rule)
    if (summary.length > 0) c.setStr("summary", summary)
    return c
  }
  static ofPrincipal(principal: string, summary: string = ""): JObj {
    const c = new JObj().set("rule", new JObj().setStr("principal", principal))
    if (summary.length > 0) c.setStr("summary", summary)
    return c
  }
}

function readInput(stage: string): JObj | null {
  const v = parse(Host.inputString())
  if (v === null || !v.isObj()) {
    setError("stage input is not a JSON object")
    return null
  }
  const o = v.asObj()
  if (o.getStr("stage") != stage) {
    setError("stage input is for '" + o.getStr("stage") + "', expected '" + stage + "'")
    return null
  }
  return o
}

/** Entry point for the `transform` export. */
export function runTransform(handler: (input: TransformInput) => Rewrite): i32 {
  const o = readInput("transform")
  if (o === null) return 1
  outputText(handler(TransformInput.from(o)).toJson().stringify())
  return 0
}

/** Entry point for the `adjudicate` export. */
export function runAdjudicate(handler: (input: AdjudicateInput) => Opinion): i32 {
  const o = readInput("adjudicate")
  if (o === null) return 1
  outputText(handler(AdjudicateInput.from(o)).toJson().stringify())
  return 0
}

/** Entry point for the `witness_contract` export. */
export function runWitnessContract(handler: (input: WitnessContractInput) => ContractOffer): i32 {
  const o = readInput("witness_contract")
  if (o === null) return 1
  outputText(handler(WitnessContractInput.from(o)).toJson().stringify())
  return 0
}

/** Entry point for the `admit` export. */
export function runAdmit(handler: (input: AdmitInput) => Admission): i32 {
  const o = readInput("admit")
  if (o === null) return 1
  outputText(handler(AdmitInput.from(o)).toJson().stringify())
  return 0
}

/** Entry point for the `observe` export. Observers never authorize: their output is `{}`. */
export function runObserve(handler: (input: ObserveInput) => void): i32 {
  const o = readInput("observe")
  if (o === null) return 1
  handler(ObserveInput.from(o))
  outputText("{}")
  return 0
}

/** Walks a JSON value and returns true when any string in it contains `needle`. */
export function containsText(v: JValue, needle: string): bool {
  if (v.isStr()) return v.asStr().value.includes(needle)
  if (v.isArr()) {
    const a = v.asArr()
    for (let i = 0; i < a.items.length; i++) if (containsText(a.items[i], needle)) return true
    return false
  }
  if (v.isObj()) {
    const o = v.asObj()
    for (let i = 0; i < o.keys.length; i++) {
      if (o.keys[i].includes(needle)) return true
      if (containsText(o.values[i], needle)) return true
    }
  }
  return false
}


/** Appends every string in a JSON value (object keys included) to `out`, depth first. */
export function collectStrings(v: JValue, out: Array<string>): void {
  if (v.isStr()) out.push(v.asStr().value)
  else if (v.isArr()) {
    const a = v.asArr()
    for (let i = 0; i < a.items.length; i++) collectStrings(a.items[i], out)
  } else if (v.isObj()) {
    const o = v.asObj()
    for (let i = 0; i < o.keys.length; i++) {
      out.push(o.keys[i])
      collectStrings(o.values[i], out)
    }
  }
}

/** The strings of a config array (non-strings skipped); `fallback` when it has none. */
export function stringList(a: JArr, fallback: Array<string> = new Array<string>()): Array<string> {
  const out = new Array<string>()
  for (let i = 0; i < a.length; i++) if (a.at(i).isStr()) out.push(a.at(i).asStr().value)
  return out.length > 0 ? out : fallback
}

/** True when `tool` is in `tools`; an entry ending in `*` matches a prefix. */
export function toolMatches(tools: Array<string>, tool: string): bool {
  for (let i = 0; i < tools.length; i++) {
    const t = tools[i]
    if (t.endsWith("*") ? tool.startsWith(t.substring(0, t.length - 1)) : t == tool) return true
  }
  return false
}
