import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { concerns, namedIn } from "../../runtime/gateway/InboxFilter.js"
import type { WitnessRule } from "../../runtime/schema/WitnessContract.js"

const name = fc.constantFrom("human", "fraud", "compliance", "oncall", "user:carol", "user:dave")
const rule: fc.Arbitrary<WitnessRule> = fc.letrec<{ r: WitnessRule }>((tie) => ({
  r: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    name.map((c) => ({ class: c })),
    name.map((p) => ({ principal: p })),
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).map((all) => ({ all })),
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).map((any) => ({ any })),
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).map((of) => ({ quorum: { n: 1, of } }))
  )
})).r

describe("inbox filter", () => {
  it("a viewer sees a call exactly when the rule names its principal or a class it has (and it is not the proposer)", () => {
    fc.assert(
      fc.property(rule, fc.option(name, { nil: undefined }), fc.array(name, { maxLength: 3 }), fc.constantFrom("agent:alice", "user:carol"), (r, principal, classes, proposer) => {
        const n = namedIn(r)
        const expected = principal !== proposer && ((principal !== undefined && n.principals.has(principal)) || classes.some((c) => n.classes.has(c)))
        expect(concerns({ ...(principal ? { principal } : {}), classes }, { principal: proposer, rule: r })).toBe(expected)
      })
    )
  })

  it("a veto class sees the call; no rule, nobody sees it", () => {
    expect(concerns({ classes: ["compliance"] }, { principal: "agent:alice", rule: { class: "human" }, veto: ["compliance"] })).toBe(true)
    expect(concerns({ classes: ["human"] }, { principal: "agent:alice", rule: null })).toBe(false)
  })
})
