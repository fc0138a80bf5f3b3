import { describe, expect, it } from "vitest"
import { callDigest, contractDigest } from "../../runtime/schema/Canonical.js"
import type { Edit } from "../../runtime/heldcall/Decide.js"
import { countingApprovals } from "../../runtime/heldcall/Counting.js"
import { proposersOf } from "../../runtime/heldcall/Counting.js"
import { editedCallDecision } from "../../runtime/policy/CallDecision.js"
import { adjudicated, at, attestation, ctxAt, digestOf, dispatched, fold, given, givenCall, held, HeldId, HumanContract, proposed, signedBy, whenOn } from "./Given.js"

// Edit on approve, in the pure core: given a parked call, when a witness edits its arguments,
// then the edit is the next generation of the same tool, its verdict and evidence start over.
const parked = [proposed(1), adjudicated(1), held(1)] as const
const editOf = (witness: string, args: Record<string, unknown>, opts: { generation?: number; klass?: string; digest?: string } = {}): Edit => {
  const payload = {
    op: "edit" as const,
    principal: witness,
    class: opts.klass ?? "human",
    held_id: HeldId,
    generation: opts.generation ?? 1,
    call_digest: opts.digest ?? digestOf(opts.generation ?? 1),
    contract_digest: contractDigest(HumanContract),
    args,
    issued_at: at(500),
    expires_at: at(600_000),
    nonce: `edit-${witness}`
  }
  return { _tag: "Edit", payload: payload as Edit["payload"], envelope: signedBy(payload) }
}
const lower = { from: "acct-a", to: "acct-b", amount: 900 }

describe("a witness's edit", () => {
  it("given a parked call, when carol edits the amount, then generation 2 runs the edited call from adjudication on", () => {
    const { facts: edited } = givenCall(...parked)
      .when(editOf("user:carol", lower))
      .then({ reply: { status: 202, disposition: "accepted", generation: 2 }, events: [{ type: "call.edited", generation: 2, witness: "user:carol", tool: "money_transfer", args: lower, call_digest: callDigest("money_transfer", lower), from_call_digest: digestOf(1) }], drive: "cached" })
    expect(edited).toMatchObject({ generation: 2, verdict: "pending", witness_contract: null, spec: { tool: "money_transfer", args: lower, idempotency_key: `${HeldId}:g2`, edited_by: { witness: "user:carol", from_call_digest: digestOf(1) } } })
  })

  it("given an approval of generation 1, when the call is edited, then that approval counts for nothing", () => {
    const approved = given(...parked, attestation({ witness: "user:dave", decision: "approve", issued: 100 }))
    expect(countingApprovals(approved, ctxAt(1_000))).toHaveLength(1)
    const { facts: edited } = givenCall(...parked, attestation({ witness: "user:dave", decision: "approve", issued: 100 })).when(editOf("user:carol", lower)).then({ events: [{ type: "call.edited" }] })
    expect(countingApprovals(edited, ctxAt(1_000))).toEqual([])
  })

  it("when the proposer, a class the contract does not admit, a stale generation or a dispatched call is edited, then nothing is written", () => {
    givenCall(...parked).when(editOf("agent:alice", lower, { klass: "agent" })).then({ reply: { status: 422, reason: "witness is not independent of the proposer" }, events: [] })
    givenCall(...parked).when(editOf("svc:fraud", lower, { klass: "fraud" })).then({ reply: { status: 422 }, events: [] })
    givenCall(...parked).when(editOf("user:carol", lower, { generation: 2 })).then({ reply: { status: 409, disposition: "stale" }, events: [] })
    givenCall(...parked, attestation({ witness: "user:dave", decision: "approve", issued: 100 }), dispatched(1)).when(editOf("user:carol", lower)).then({ reply: { status: 409, disposition: "stale" }, events: [] })
  })

  it("when the same signed edit comes again, then it is a duplicate and the call is driven afresh", () => {
    const edit = editOf("user:carol", lower)
    givenCall(...parked).when(edit).then({ events: [{ type: "call.edited" }] }).when(edit).then({ reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" })
  })
})

describe("an edit never hands its editor a power it did not hold", () => {
  it("given a contract that admits compliance only to veto, when compliance:zoe edits the call, then the edit is refused and nothing is written", () => {
    givenCall(...parked)
      .when(editOf("compliance:zoe", lower, { klass: "compliance" }))
      .then({ reply: { status: 422, disposition: "invalid", reason: "class 'compliance' may not edit: the contract admits it only to veto or give evidence, and only an approver may edit" }, events: [] })
  })

  it("given carol's edit, when carol approves the edited generation, then her approval does not count; dave's does", () => {
    const { facts: edited } = givenCall(...parked).when(editOf("user:carol", lower)).then({ events: [{ type: "call.edited" }] })
    const contract = edited.spec!.edited_by!.contract!
    expect(contract).toEqual(HumanContract)
    expect(edited.spec!.edited_by!.editors).toEqual(["user:carol"])
    const g2 = [adjudicated(2, { contract }), held(2, contract)] as const
    const mine = fold(edited, ...g2, attestation({ witness: "user:carol", decision: "approve", issued: 700, generation: 2, callDigest: edited.spec!.call_digest }))
    expect(countingApprovals(mine, ctxAt(1_000))).toEqual([])
    const dave = fold(mine, attestation({ witness: "user:dave", decision: "approve", issued: 800, generation: 2, callDigest: edited.spec!.call_digest }))
    expect(countingApprovals(dave, ctxAt(1_000)).map((a) => a.witness)).toEqual(["user:dave"])
  })

  it("given two edits by carol then dave, when either approves, then neither counts: both proposed the call", () => {
    const { facts: first } = givenCall(...parked).when(editOf("user:carol", lower)).then({ events: [{ type: "call.edited" }] })
    const c = first.spec!.edited_by!.contract!
    const g2 = fold(first, adjudicated(2, { contract: c }), held(2, c))
    const second = whenOn(g2).when(editOf("user:dave", { ...lower, amount: 800 }, { generation: 2, digest: first.spec!.call_digest })).then({ events: [{ type: "call.edited", generation: 3 }] }).facts
    expect(second.spec!.edited_by!.editors).toEqual(["user:carol", "user:dave"])
    expect(proposersOf(second)).toEqual(["agent:alice", "user:carol", "user:dave"])
  })

  it("a kernel_policy_apply call is never edited: a policy change is proposed again, whole", () => {
    const policyCall = given(...parked)
    const asPolicy = { ...policyCall, spec: { ...policyCall.spec!, tool: "kernel_policy_apply" } }
    whenOn(asPolicy).when(editOf("user:carol", { profile: { name: "x" } })).then({ reply: { status: 422, reason: "a kernel_policy_apply call is not edited: propose the change again, whole" }, events: [] })
  })
})

describe("the decision on an edited call", () => {
  const spec = { principal: "agent:alice", session_id: "s", turn_id: "t", call_id: "c", tool: "money_transfer", args: lower }
  const allow = { verdict: "ALLOW" as const, reasons: [], decisions: [], executed: { tool: "money_transfer", args: lower } }
  it("an ALLOW for the edited arguments becomes a hold on the contract the call was held with", () => {
    const d = editedCallDecision({ ...spec, edited_by: { contract: HumanContract } }, allow)
    expect(d).toMatchObject({ verdict: "REQUIRE_WITNESS", contract: HumanContract })
  })
  it("a DENY stays a DENY; an unedited call is decided as before", () => {
    const deny = { ...allow, verdict: "DENY" as const, reasons: [{ by: "rule", reason: "cap" }] }
    expect(editedCallDecision({ ...spec, edited_by: { contract: HumanContract } }, deny)).toBe(deny)
    expect(editedCallDecision(spec, allow)).toBe(allow)
  })
  it("a hold for the edited arguments waits for both contracts", () => {
    const fraud = { rule: { class: "fraud" } }
    const d = editedCallDecision({ ...spec, edited_by: { contract: HumanContract } }, { ...allow, verdict: "REQUIRE_WITNESS", contract: fraud })
    expect(d.contract).toMatchObject({ rule: { all: [{ class: "fraud" }, { class: "human" }] }, veto: ["compliance"] })
  })
})
