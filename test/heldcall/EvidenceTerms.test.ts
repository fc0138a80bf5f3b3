import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { outlookOf, unmetEvidenceTerms } from "../../runtime/heldcall/Counting.js"
import { meetsTerm, resolveTerm, type EvidenceRecord } from "../../runtime/schema/EvidenceTerm.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import { adjudicated, attestation, attestOf, ctxAt, decideCtxAt, given, givenCall, held, proposed, Registry } from "./Given.js"

// Evidence terms: a contract may need evidence besides its rule's approvals. A term is met only by
// an `evidence` statement from a witness its `by` admits, whose record reads what the term
// expects for this call's arguments (the test call moves money to `acct-b`).
const Merged = { name: "merged", kind: "git-ancestry", by: { class: "verifier" }, params: { repo: "app", commit: "{args.to}", ref: "main" }, expect: { commit: "{args.to}", is_ancestor: true } }
const Contract: WitnessContract = { rule: { class: "human" }, evidence: [Merged] }
const parked = [proposed(1), adjudicated(1, { contract: Contract }), held(1, Contract)] as const
const classesOf = (p: string) => (p === "svc:git" ? ["verifier"] : p === "agent:alice" ? ["agent", "verifier"] : (Registry[p] ?? []))
const ctx = ctxAt(5_000, 1, { classesOf, principals: () => [...Object.keys(Registry), "svc:git"] })
const record = (read: EvidenceRecord["read"], term = "merged", kind = "git-ancestry"): EvidenceRecord => ({ term, kind, read })
const approve = attestation({ witness: "user:carol", decision: "approve", issued: 1_000, contract: Contract })
const evidence = (witness: string, read: EvidenceRecord["read"], opts: { expiresMs?: number } = {}) =>
  attestation({ witness, class: "verifier", decision: "evidence", issued: 1_500, contract: Contract, evidence: record(read), ...opts })

describe("evidence terms in the pure core", () => {
  it("given an approval only, when counted, then the call waits for the term", () => {
    const f = given(...parked, approve)
    expect(unmetEvidenceTerms(f, ctx).map((t) => t.name)).toEqual(["merged"])
    expect(outlookOf(f, ctx).status).toBe("pending")
  })

  it("given the approval and the verifier's matching evidence, then the call is satisfied", () => {
    const f = given(...parked, approve, evidence("svc:git", { commit: "acct-b", is_ancestor: true, ref_sha: "abc" }))
    expect(unmetEvidenceTerms(f, ctx)).toEqual([])
    expect(outlookOf(f, ctx).status).toBe("satisfied")
  })

  it("given evidence that read otherwise (not an ancestor, another commit), then the term stays unmet", () => {
    const reads: ReadonlyArray<EvidenceRecord["read"]> = [{ commit: "acct-b", is_ancestor: false }, { commit: "acct-x", is_ancestor: true }, { is_ancestor: true }]
    for (const read of reads) {
      expect(outlookOf(given(...parked, approve, evidence("svc:git", read)), ctx).status).toBe("pending")
    }
  })

  it("given evidence from the proposer, or expired, then it does not count", () => {
    expect(outlookOf(given(...parked, approve, evidence("agent:alice", { commit: "acct-b", is_ancestor: true })), ctx).status).toBe("pending")
    expect(outlookOf(given(...parked, approve, evidence("svc:git", { commit: "acct-b", is_ancestor: true }, { expiresMs: 2_000 })), ctx).status).toBe("pending")
  })

  it("given evidence alone, then the rule's approval is still needed", () => {
    expect(outlookOf(given(...parked, evidence("svc:git", { commit: "acct-b", is_ancestor: true })), ctx).status).toBe("pending")
  })

  it("resolves {args.field} anywhere in a term and meets only exact reads (property)", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 12 }), fc.boolean(), (to, ok) => {
        const args = { to }
        expect(resolveTerm({ a: ["{args.to}", { b: "{args.to}" }], c: "{args.none}", d: "x{args.to}" }, args)).toEqual({ a: [to, { b: to }], c: null, d: "x{args.to}" })
        expect(meetsTerm(Merged, record({ commit: to, is_ancestor: ok }), args)).toBe(ok)
        expect(meetsTerm(Merged, record({ commit: to, is_ancestor: true }, "other"), args)).toBe(false)
        expect(meetsTerm(Merged, record({ commit: to, is_ancestor: true }, "merged", "sql-readback"), args)).toBe(false)
      })
    )
  })
})

describe("deciding an evidence attestation", () => {
  const dctx = decideCtxAt(1_000, { classesOf, keysOf: (p) => (classesOf(p).length > 0 ? [`key:${p}`] : []) })
  const evidenceOf = (witness: string, ev?: EvidenceRecord, decision: "evidence" | "approve" = "evidence") =>
    attestOf({ witness, class: classesOf(witness)[0] ?? "unknown", decision, contract: Contract, ...(ev !== undefined ? { evidence: ev } : {}) })

  it("when a verifier the term admits attests evidence, then it is recorded with what it read", () => {
    givenCall(...parked)
      .when(evidenceOf("svc:git", record({ commit: "acct-b", is_ancestor: true })), dctx)
      .then({ reply: { status: 202, disposition: "accepted" }, events: [{ type: "attestation.accepted", decision: "evidence", evidence: { term: "merged", kind: "git-ancestry", read: { commit: "acct-b", is_ancestor: true } } }] })
  })

  it("when evidence names no term, another kind, or comes from a witness the term does not admit, then it is invalid", () => {
    const invalid = (cmd: ReturnType<typeof evidenceOf>, reason: RegExp) => {
      const { decision } = givenCall(...parked).when(cmd, dctx)
      expect(decision.reply).toMatchObject({ status: 422, disposition: "invalid" })
      expect(String(decision.reply["reason"])).toMatch(reason)
    }
    invalid(evidenceOf("svc:git"), /needs payload\.evidence/)
    invalid(evidenceOf("svc:git", record({}, "deployed")), /no evidence term 'deployed'/)
    invalid(evidenceOf("svc:git", record({}, "merged", "sql-readback")), /kind 'git-ancestry'/)
    invalid(evidenceOf("user:carol", record({ commit: "acct-b", is_ancestor: true })), /may not supply evidence for term 'merged'/)
    invalid(evidenceOf("user:carol", record({ commit: "acct-b", is_ancestor: true }), "approve"), /only with decision evidence/)
  })
})
