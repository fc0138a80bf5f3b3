import { describe, expect, it } from "vitest"
import { callDigest, contractDigest } from "../../runtime/schema/Canonical.js"
import type { Edit } from "../../runtime/heldcall/Decide.js"
import { countingApprovals } from "../../runtime/heldcall/Counting.js"
import { adjudicated, at, attestation, ctxAt, digestOf, dispatched, given, givenCall, held, HeldId, HumanContract, proposed, signedBy } from "./Given.js"

// Edit on approve, in the pure core: given a parked call, when a witness edits its arguments,
// then the edit is the next generation of the same tool, its verdict and evidence start over.
const parked = [proposed(1), adjudicated(1), held(1)] as const
const editOf = (witness: string, args: Record<string, unknown>, opts: { generation?: number; klass?: string } = {}): Edit => {
  const payload = {
    op: "edit" as const,
    principal: witness,
    class: opts.klass ?? "human",
    held_id: HeldId,
    generation: opts.generation ?? 1,
    call_digest: digestOf(opts.generation ?? 1),
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
