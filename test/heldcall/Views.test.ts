import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { eventView, heldView, mayWitness, namedIn, roleOf, type Role } from "../../runtime/heldcall/Views.js"
import { proposeReply } from "../../runtime/protocol/Replies.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import type { JsonValue } from "../../runtime/schema/Json.js"
import { routeAdmits, type WitnessRule } from "../../runtime/schema/WitnessContract.js"
import { HeldId, HumanContract, adjudicated, at, fold, given, held, proposed } from "./Given.js"

// What each reader may see, decided in one place: quarantined bytes only in the auditor's view,
// disclosure in every witness-facing view, and who counts as a witness.
const Secret = "AKIA" + "IOSFODNN7EXAMPLE"
const Roles: ReadonlyArray<Role> = ["auditor", "admin", "proposer", "witness"]

const recorded = (ok: boolean, bytes: JsonValue): HeldEvent =>
  ({ type: "effect.recorded", event_id: `effect.recorded:${HeldId}:g1`, held_id: HeldId, generation: 1, at: at(60), idempotency_key: "k", ok, ...(ok ? { result: bytes } : { error: String(bytes) }), via: "dispatch" }) as HeldEvent
const quarantined: HeldEvent = { type: "result.quarantined", event_id: `result.quarantined:${HeldId}:g1`, held_id: HeldId, generation: 1, at: at(61), by: "plugin:secret-detect@1.0.0", reason: "result contains a secret", decisions: [{ by: "plugin:secret-detect@1.0.0", output: { quarantine: Secret } }] }
const admitted = (result: JsonValue): HeldEvent => ({ type: "result.admitted", event_id: `result.admitted:${HeldId}:g1`, held_id: HeldId, generation: 1, at: at(61), result, decisions: [] })

/** An ALLOW call whose tool answered with `bytes` (as its result, or as its error), then quarantined. */
const quarantinedCall = (ok: boolean, bytes: JsonValue) => ({
  facts: given(proposed(1), adjudicated(1, { verdict: "ALLOW" }), recorded(ok, bytes), quarantined),
  events: [proposed(1), adjudicated(1, { verdict: "ALLOW" }), recorded(ok, bytes), quarantined]
})

describe("quarantined bytes", () => {
  it("appear in no view but the auditor's: facts, events and the propose reply", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.string({ minLength: 1, maxLength: 20 }), (ok, noise) => {
        const bytes = `${noise} ${Secret}`
        const { facts, events } = quarantinedCall(ok, ok ? { token: bytes } : bytes)
        expect(facts.result_admission).toBe("quarantined")
        for (const role of Roles) {
          const shown = JSON.stringify([heldView(role, facts), events.map((e) => eventView(role, e))])
          if (role === "auditor") expect(shown).toContain(Secret)
          else expect(shown, role).not.toContain(Secret)
        }
        const reply = proposeReply(facts)
        expect(reply).toMatchObject({ status: 200, admission: "quarantined", result: null, ok })
        expect(JSON.stringify(reply)).not.toContain(Secret)
      })
    )
  })

  it("an admitted tool error is the proposer's to see", () => {
    const facts = given(proposed(1), adjudicated(1, { verdict: "ALLOW" }), recorded(false, "insufficient funds"), admitted({ error: "insufficient funds" }))
    expect(proposeReply(facts)).toMatchObject({ outcome: "tool_failed", ok: false, error: "insufficient funds", admission: "admitted" })
  })
})

describe("disclosure", () => {
  const redactedHeld = (): HeldEvent => ({ ...held(1), witness_request: { ...held(1).witness_request, presentation: { disclosure: "redacted", args: { amount: "[redacted number]" } } } })
  it("redacted: a witness sees neither arguments, results nor policy reasons; the proposer sees its own", () => {
    const facts = fold(given(proposed(1), adjudicated(1), redactedHeld()), recorded(true, { moved: 1500 }), admitted({ moved: 1500 }))
    const witness = JSON.stringify(heldView("witness", facts))
    expect(witness).not.toContain("1500")
    expect(witness).not.toContain("acct-a")
    expect(witness).not.toContain("over the threshold")
    expect(heldView("witness", facts)).toMatchObject({ args: { amount: "[redacted number]" }, result: { moved: "[redacted number]" }, call_digest: facts.spec!.call_digest })
    expect(heldView("proposer", facts)).toMatchObject({ args: { amount: 1500 }, result: { moved: 1500 } })
  })

  it("a witness's events never carry arguments, results, reasons or the signed request, whatever the disclosure", () => {
    const events: ReadonlyArray<HeldEvent> = [{ ...proposed(1), envelope: { payload: { args: { amount: 1500 } } as never, key: "AAAA", sig: "AAAA" } }, adjudicated(1), held(1), recorded(true, { moved: 1500 }), admitted({ moved: 1500 })]
    const shown = JSON.stringify(events.map((e) => eventView("witness", e)))
    expect(shown).not.toContain("1500")
    expect(shown).not.toContain("over the threshold")
    expect(events.map((e) => eventView("witness", e)["type"])).toEqual(events.map((e) => e.type))
  })
})

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

describe("who may witness", () => {
  it("a reader may witness exactly when the rule names its principal or a class it has, and it is not the proposer", () => {
    fc.assert(
      fc.property(rule, fc.option(name, { nil: undefined }), fc.array(name, { maxLength: 3 }), fc.constantFrom("agent:alice", "user:carol"), (r, principal, classes, proposer) => {
        const n = namedIn(r)
        const expected = principal !== proposer && ((principal !== undefined && n.principals.has(principal)) || classes.some((c) => n.classes.has(c)))
        expect(mayWitness({ ...(principal ? { principal } : {}), classes }, { principal: proposer, rule: r })).toBe(expected)
      })
    )
  })

  it("a veto class may witness; with no rule nobody may; a stranger reads nothing, an admin everything", () => {
    expect(mayWitness({ classes: ["compliance"] }, { principal: "agent:alice", rule: { class: "human" }, veto: ["compliance"] })).toBe(true)
    expect(mayWitness({ classes: ["human"] }, { principal: "agent:alice", rule: null })).toBe(false)
    const facts = given(proposed(1), adjudicated(1), held(1))
    expect(roleOf({ principal: "agent:alice", classes: ["agent"], admin: false }, facts)).toBe("proposer")
    expect(roleOf({ principal: "user:carol", classes: ["human"], admin: false }, facts)).toBe("witness")
    expect(roleOf({ principal: "compliance:zoe", classes: ["compliance"], admin: false }, facts)).toBe("witness")
    expect(roleOf({ principal: "agent:bob", classes: ["agent"], admin: false }, facts)).toBe(null)
    expect(roleOf({ principal: "admin:root", classes: ["admin"], admin: true }, facts)).toBe("admin")
  })

  it("a route picks among the rule's witnesses: one it excludes is not offered the call (a veto class still is)", () => {
    const routed = { ...HumanContract, route: { principal: "user:carol" }, veto: ["compliance"] }
    const facts = given(proposed(1), adjudicated(1, { contract: routed }), held(1, routed))
    expect(roleOf({ principal: "user:carol", classes: ["human"], admin: false }, facts)).toBe("witness")
    expect(roleOf({ principal: "user:dave", classes: ["human"], admin: false }, facts)).toBe(null)
    expect(roleOf({ principal: "compliance:zoe", classes: ["compliance"], admin: false }, facts)).toBe("witness")
    fc.assert(
      fc.property(rule, rule, fc.option(name, { nil: undefined }), fc.array(name, { maxLength: 3 }), (r, route, principal, classes) => {
        const reader = { ...(principal ? { principal } : {}), classes }
        const offered = mayWitness(reader, { principal: "agent:alice", rule: r, route })
        // Routed, a reader is offered the call only when the route admits it as well as the rule.
        if (offered) expect(routeAdmits(route, principal ?? "", classes)).toBe(true)
        if (offered) expect(mayWitness(reader, { principal: "agent:alice", rule: r })).toBe(true)
      })
    )
  })
})

