import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { classesOf, principalsOf, ruleStatus, satisfies, type Approval } from "../../runtime/heldcall/WitnessRuleEval.js"
import { admittedWitnesses } from "../../runtime/heldcall/Reconciler.js"
import type { WitnessRule } from "../../runtime/schema/WitnessContract.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const carol: Approval = { witness: "user:carol", class: "human" }
const dave: Approval = { witness: "user:dave", class: "human" }
const erin: Approval = { witness: "user:erin", class: "human" }
const fraud: Approval = { witness: "svc:fraud", class: "fraud" }
const zoe: Approval = { witness: "compliance:zoe", class: "compliance" }
const carolAsFraud: Approval = { witness: "user:carol", class: "fraud" }

const human: WitnessRule = { class: "human" }
const twoHumans: WitnessRule = { class: "human", count: 2 }

describe("satisfies: table", () => {
  const table: ReadonlyArray<[string, WitnessRule, ReadonlyArray<Approval>, boolean]> = [
    ["class: one of the class", human, [carol], true],
    ["class: none given", human, [], false],
    ["class: only other classes", human, [fraud, zoe], false],
    ["class count 2: two distinct principals", twoHumans, [carol, dave], true],
    ["class count 2: one principal twice does not count twice", twoHumans, [carol, carol], false],
    ["class count 2: one of the class and one of another", twoHumans, [carol, fraud], false],
    ["class count 3: three distinct", { class: "human", count: 3 }, [carol, dave, erin], true],
    ["class count: a principal counts under the class it attested with only", { class: "fraud", count: 2 }, [fraud, carol], false],
    ["class count: same principal under two classes is still one principal per class", { class: "fraud", count: 2 }, [fraud, carolAsFraud], true],
    ["principal: that principal", { principal: "user:erin" }, [erin], true],
    ["principal: any class of that principal", { principal: "user:carol" }, [carolAsFraud], true],
    ["principal: someone else of the same class", { principal: "user:erin" }, [carol, dave], false],
    ["all: every part", { all: [human, { class: "fraud" }] }, [carol, fraud], true],
    ["all: one part missing", { all: [human, { class: "fraud" }] }, [carol, dave], false],
    ["any: one part", { any: [{ class: "fraud" }, { principal: "user:erin" }] }, [erin], true],
    ["any: no part", { any: [{ class: "fraud" }, { principal: "user:erin" }] }, [carol], false],
    ["any: empty is never satisfied", { any: [] }, [carol, dave, fraud], false],
    ["quorum 2 of 3: two parts", { quorum: { n: 2, of: [human, { class: "fraud" }, { class: "compliance" }] } }, [carol, zoe], true],
    ["quorum 2 of 3: one part", { quorum: { n: 2, of: [human, { class: "fraud" }, { class: "compliance" }] } }, [carol, dave], false],
    ["quorum 3 of 3: all parts", { quorum: { n: 3, of: [human, { class: "fraud" }, { class: "compliance" }] } }, [carol, fraud, zoe], true],
    ["quorum n over the parts: never", { quorum: { n: 4, of: [human, { class: "fraud" }, { class: "compliance" }] } }, [carol, fraud, zoe], false],
    ["nested: all(any(...), count 2)", { all: [{ any: [{ class: "fraud" }, { class: "compliance" }] }, twoHumans] }, [zoe, carol, dave], true],
    ["nested: all(any(...), count 2) with one human", { all: [{ any: [{ class: "fraud" }, { class: "compliance" }] }, twoHumans] }, [zoe, carol], false],
    // One principal counts once across the whole rule.
    ["all: one principal holding both classes is one principal", { all: [human, { class: "fraud" }] }, [carol, carolAsFraud], false],
    ["all: that principal fills one part, another the other", { all: [human, { class: "fraud" }] }, [carol, carolAsFraud, dave], true],
    ["all: that principal fills the part the other cannot", { all: [human, { class: "fraud" }] }, [carol, carolAsFraud, fraud], true],
    ["quorum 2: one principal under two classes is not two", { quorum: { n: 2, of: [human, { class: "fraud" }] } }, [carol, carolAsFraud], false],
    ["quorum 2: a named principal and the same principal by class", { quorum: { n: 2, of: [{ principal: "user:carol" }, human] } }, [carol], false],
    ["quorum 2: a named principal and another by class", { quorum: { n: 2, of: [{ principal: "user:carol" }, human] } }, [carol, dave], true],
    ["all: count 2 and a named member of the class need three", { all: [twoHumans, { principal: "user:erin" }] }, [carol, erin], false],
    ["all: count 2 and a named member of the class with three", { all: [twoHumans, { principal: "user:erin" }] }, [carol, dave, erin], true]
  ]
  it.each(table)("%s", (_name, rule, approvals, expected) => {
    expect(satisfies(rule, approvals)).toBe(expected)
  })

  // REGRESSION (fixed; the schema also refuses empty lists) (runtime/heldcall/WitnessRuleEval.ts `satisfies`, the "all" branch): `{ all: [] }`
  // is vacuously satisfied by no approvals at all, so a REQUIRE_WITNESS contract whose rule is
  // an empty `all` (the Schema allows empty arrays) releases a held call with zero witnesses.
  // A witness rule that names no witness should fail closed, like `any: []` already does.
  it("all: empty is never satisfied (fail closed)", () => {
    expect(satisfies({ all: [] }, [])).toBe(false)
  })
})

describe("satisfies: properties", () => {
  const approvalArb = fc.record({ witness: fc.constantFrom("user:carol", "user:dave", "user:erin", "svc:fraud", "compliance:zoe"), class: fc.constantFrom("human", "fraud", "compliance") })
  const ruleArb: fc.Arbitrary<WitnessRule> = fc.letrec<{ rule: WitnessRule }>((tie) => ({
    rule: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.record({ class: fc.constantFrom("human", "fraud", "compliance"), count: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }) }).map((r) => (r.count === undefined ? { class: r.class } : { class: r.class, count: r.count })),
      fc.constantFrom("user:carol", "svc:fraud").map((principal) => ({ principal })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).map((all) => ({ all })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).map((any) => ({ any })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).chain((of) => fc.integer({ min: 1, max: of.length }).map((n) => ({ quorum: { n, of } })))
    )
  })).rule

  it("is order-independent and ignores duplicate approvals", () => {
    fc.assert(
      fc.property(ruleArb, fc.array(approvalArb, { maxLength: 6 }), (rule, approvals) => {
        const expected = satisfies(rule, approvals)
        expect(satisfies(rule, [...approvals].reverse())).toBe(expected)
        expect(satisfies(rule, [...approvals, ...approvals])).toBe(expected)
      })
    )
  })

  it("is monotone: another approval never un-satisfies a rule", () => {
    fc.assert(
      fc.property(ruleArb, fc.array(approvalArb, { maxLength: 6 }), approvalArb, (rule, approvals, more) => {
        if (satisfies(rule, approvals)) expect(satisfies(rule, [...approvals, more])).toBe(true)
      })
    )
  })

  it("approvals of classes and principals the rule never names cannot satisfy it", () => {
    fc.assert(
      fc.property(ruleArb, fc.array(approvalArb, { maxLength: 6 }), (rule, approvals) => {
        const named = approvals.filter((a) => classesOf(rule).includes(a.class) || principalsOf(rule).includes(a.witness))
        expect(satisfies(rule, approvals)).toBe(satisfies(rule, named))
      })
    )
  })
})

/**
 * The meaning of "each principal counts once", stated independently: some assignment of each
 * approving principal to at most one leaf meets the rule, where a leaf counts only the
 * principals assigned to it. Brute force over every assignment.
 */
const bruteForce = (rule: WitnessRule, approvals: ReadonlyArray<Approval>): boolean => {
  const leaves: Array<WitnessRule> = []
  const index = new Map<WitnessRule, number>()
  const walk = (r: WitnessRule): void => {
    if ("class" in r || "principal" in r) {
      index.set(r, leaves.length)
      leaves.push(r)
    } else ("all" in r ? r.all : "any" in r ? r.any : r.quorum.of).forEach(walk)
  }
  walk(rule)
  const principals = [...new Set(approvals.map((a) => a.witness))]
  const holds = (r: WitnessRule, at: ReadonlyMap<string, number>): boolean => {
    if ("class" in r || "principal" in r) {
      const mine = principals.filter((p) => at.get(p) === index.get(r))
      if ("principal" in r) return mine.includes(r.principal)
      return mine.filter((p) => approvals.some((a) => a.witness === p && a.class === r.class)).length >= (r.count ?? 1)
    }
    if ("all" in r) return r.all.length > 0 && r.all.every((x) => holds(x, at))
    if ("any" in r) return r.any.some((x) => holds(x, at))
    return r.quorum.of.filter((x) => holds(x, at)).length >= r.quorum.n
  }
  const search = (i: number, at: Map<string, number>): boolean => {
    if (i === principals.length) return holds(rule, at)
    for (let leaf = -1; leaf < leaves.length; leaf++) {
      at.set(principals[i]!, leaf)
      if (search(i + 1, at)) return true
    }
    at.delete(principals[i]!)
    return false
  }
  return search(0, new Map())
}

describe("satisfies: each principal counts once (properties)", () => {
  const approvalArb = fc.record({ witness: fc.constantFrom("user:carol", "user:dave", "svc:fraud", "compliance:zoe"), class: fc.constantFrom("human", "fraud", "compliance") })
  const smallRule: fc.Arbitrary<WitnessRule> = fc.letrec<{ rule: WitnessRule }>((tie) => ({
    rule: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.record({ class: fc.constantFrom("human", "fraud", "compliance"), count: fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }) }).map((r) => (r.count === undefined ? { class: r.class } : { class: r.class, count: r.count })),
      fc.constantFrom("user:carol", "svc:fraud").map((principal) => ({ principal })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 2 }).map((all) => ({ all })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 2 }).map((any) => ({ any })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).chain((of) => fc.integer({ min: 1, max: of.length }).map((n) => ({ quorum: { n, of } })))
    )
  })).rule

  it("agrees with a brute force over every assignment of principals to the rule's leaves", () => {
    fc.assert(
      fc.property(smallRule, fc.array(approvalArb, { maxLength: 5 }), (rule, approvals) => {
        expect(satisfies(rule, approvals)).toBe(bruteForce(rule, approvals))
      }),
      { numRuns: 300 }
    )
  })

  it("ruleStatus: satisfied exactly when the approvals satisfy it; unsatisfiable never gains from fewer possible approvals", () => {
    fc.assert(
      fc.property(smallRule, fc.array(approvalArb, { maxLength: 4 }), fc.array(approvalArb, { maxLength: 4 }), (rule, approvals, possible) => {
        const status = ruleStatus(rule, approvals, possible)
        expect(status === "satisfied").toBe(satisfies(rule, approvals))
        if (status === "unsatisfiable") expect(ruleStatus(rule, approvals, possible.slice(1))).toBe("unsatisfiable")
        if (status === "pending") expect(satisfies(rule, [...approvals, ...possible])).toBe(true)
      })
    )
  })
})

describe("ruleStatus: given / when / then", () => {
  const registry: ReadonlyArray<Approval> = [carol, dave, fraud, zoe]
  it("given a human rule, when carol rejected and dave still may approve, then it is pending", () => {
    expect(ruleStatus(human, [], registry.filter((a) => a.witness !== "user:carol"))).toBe("pending")
  })
  it("given a rule naming carol, when carol rejected, then it is unsatisfiable", () => {
    expect(ruleStatus({ principal: "user:carol" }, [], registry.filter((a) => a.witness !== "user:carol"))).toBe("unsatisfiable")
  })
  it("given (human AND fraud), when the only fraud witness rejected, then it is unsatisfiable whatever the humans do", () => {
    expect(ruleStatus({ all: [human, { class: "fraud" }] }, [carol], registry.filter((a) => a.witness !== "svc:fraud"))).toBe("unsatisfiable")
  })
})

describe("classesOf / principalsOf / admittedWitnesses", () => {
  const rule: WitnessRule = { all: [{ any: [human, { principal: "svc:fraud" }] }, { quorum: { n: 1, of: [{ class: "oncall" }, human, { principal: "op:breakglass" }] } }] }

  it("lists every class and principal a rule mentions, once", () => {
    expect([...classesOf(rule)].sort()).toEqual(["human", "oncall"])
    expect([...principalsOf(rule)].sort()).toEqual(["op:breakglass", "svc:fraud"])
    expect(classesOf({ principal: "x" })).toEqual([])
    expect(principalsOf(human)).toEqual([])
  })

  it("admits the rule's, the fallback route's and the veto classes", () => {
    const admitted = admittedWitnesses({ rule: human, veto: ["compliance"], fallback: { after_ms: 1000, action: "route", rule: { any: [{ class: "oncall" }, { principal: "op:breakglass" }] } } })
    expect([...admitted.classes].sort()).toEqual(["compliance", "human", "oncall"])
    expect(admitted.principals).toEqual(["op:breakglass"])
    // a deny fallback admits nothing extra
    expect(admittedWitnesses({ rule: human, fallback: { after_ms: 1000, action: "deny" } })).toEqual({ classes: ["human"], principals: [] })
  })
})
