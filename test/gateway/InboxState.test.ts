import { describe, expect, it } from "vitest"
import { inboxScripts } from "./InboxScript.js"

type View = Record<string, unknown>
interface Standing { kind: string; line: string; mayDecide: boolean; my: string | null; missing: Array<string>; rejecters: Array<string>; you: string }
const St = inboxScripts<{
  titleOf: (h: View) => string
  kindOf: (h: View) => string
  standingOf: (h: View, viewer: { principal: string; klass: string } | null) => Standing
  expiryOf: (h: View, now: number) => string
  missingOf: (h: View) => Array<string>
}>(["words.js", "state.js"], "inboxState")

// Where a call stands for the person reading it, from the `held.get` view alone.
const carol = { principal: "user:carol", klass: "human" }
const now = Date.parse("2026-12-07T20:00:00.000Z")
const onePerson = (over: View = {}): View => ({
  held_id: "h1", tool: "money_transfer", principal: "agent:alice", lifecycle: "open", readiness: "unsatisfied", execution: "none", generation: 1,
  created_at: "2026-12-07T19:59:00.000Z", expires_at: "2026-12-07T20:29:00.000Z",
  active_rule: { class: "human" }, rule_progress: { class: "human", count: 1, by: [], met: false },
  witness_contract: { rule: { class: "human" }, summary: "a person approves transfers over 1,000; denied after an hour", fallback: { after_ms: 3_600_000, action: "deny" } },
  witness_request: { presentation: { tool: "money_transfer", disclosure: "exact", summary: "Transfer 2,500 EUR from alice to bob" }, contract: { summary: "a person approves transfers over 1,000; denied after an hour" } },
  evidence: [],
  ...over
})
const said = (witness: string, decision: string) => ({ witness, class: "human", decision, status: "valid", issued_at: "2026-12-07T19:59:30.000Z", expires_at: "2026-12-07T20:09:30.000Z" })

describe("inbox state", () => {
  it("a call nobody decided: open, what it still needs, and the viewer may approve or reject", () => {
    const s = St.standingOf(onePerson(), carol)
    expect(s).toMatchObject({ kind: "open", line: "open · still needs a person", mayDecide: true, my: null })
    expect(s.you).toBe("You may approve or reject it.")
  })

  it("after carol rejects a one-person call: her reject is named, she is offered nothing, and it is not 'waiting for witnesses'", () => {
    const s = St.standingOf(onePerson({ evidence: [said("user:carol", "reject")] }), carol)
    expect(s.line).toBe("open · rejected by user:carol · still needs a person")
    expect(s.line).not.toContain("waiting for witnesses")
    expect(s).toMatchObject({ kind: "rejected", mayDecide: false, my: "reject", rejecters: ["user:carol"] })
    expect(s.you).toContain("You rejected it")
    // Another person may still decide it.
    expect(St.standingOf(onePerson({ evidence: [said("user:carol", "reject")] }), { principal: "user:dave", klass: "human" }).mayDecide).toBe(true)
  })

  it("after carol's approval: approved and running, nothing left for her to do; ended, the outcome", () => {
    const approved = onePerson({ readiness: "satisfied", execution: "dispatched", evidence: [said("user:carol", "approve")], rule_progress: { class: "human", count: 1, by: ["user:carol"], met: true } })
    const s = St.standingOf(approved, carol)
    expect(s).toMatchObject({ kind: "approved", line: "open · approved · dispatched", mayDecide: false, my: "approve" })
    expect(s.you).toBe("You approved it; it runs now.")
    const done = St.standingOf({ ...approved, lifecycle: "completed", execution: "completed", tool_ok: true }, carol)
    expect(done).toMatchObject({ kind: "completed", line: "completed", mayDecide: false })
    expect(done.you).toContain("nothing left to decide")
  })

  it("a denied call names who rejected it; the badge's outcome is failed for a tool failure, never completed", () => {
    expect(St.standingOf(onePerson({ lifecycle: "denied", evidence: [said("compliance:zoe", "reject")] }), carol).line).toBe("denied · rejected by compliance:zoe")
    expect(St.kindOf(onePerson({ lifecycle: "completed", tool_ok: false, outcome: "tool_failed" }))).toBe("failed")
    expect(St.kindOf(onePerson({ lifecycle: "completed", tool_ok: true }))).toBe("completed")
    expect(St.kindOf(onePerson({ lifecycle: "expired" }))).toBe("expired")
  })

  it("what is missing follows the rule's progress: the person is in, the fraud service or break-glass are not", () => {
    const progress = { any: [{ all: [{ class: "human", count: 1, by: ["user:carol"], met: true }, { class: "fraud", count: 1, by: [], met: false }], met: false }, { class: "breakglass", count: 1, by: [], met: false }], met: false }
    expect(St.missingOf(onePerson({ rule_progress: progress }))).toEqual(["the fraud service or a break-glass operator"])
    expect(St.missingOf(onePerson({ rule_progress: { class: "human", count: 2, by: ["user:carol"], met: false } }))).toEqual(["a person"])
  })

  it("the title is the call's summary, never the rule's text; redacted, the tool", () => {
    expect(St.titleOf(onePerson())).toBe("Transfer 2,500 EUR from alice to bob")
    const ruleTitled = onePerson({ witness_request: { presentation: { tool: "money_transfer", disclosure: "redacted", summary: "a person approves transfers over 1,000; denied after an hour" }, contract: { summary: "a person approves transfers over 1,000; denied after an hour" } } })
    expect(St.titleOf(ruleTitled)).toBe("money_transfer (arguments redacted)")
  })

  it("the expiry comes from the call's own expires_at, not the rule's fallback when the call ends first", () => {
    expect(St.expiryOf(onePerson(), now)).toMatch(/^expires in 29 min \(at .+\)$/)
    expect(St.expiryOf(onePerson(), now)).not.toContain("hour")
    // A fallback sooner than the expiry is what happens first, and is said.
    const soon = St.expiryOf(onePerson({ witness_contract: { rule: { class: "human" }, fallback: { after_ms: 600_000, action: "deny" } } }), now)
    expect(soon).toMatch(/^no decision in 9 min \(by .+\): it is denied; the call expires /)
    expect(St.expiryOf(onePerson({ lifecycle: "completed" }), now)).toBe("")
  })
})
