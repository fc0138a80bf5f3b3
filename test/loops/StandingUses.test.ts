import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import type { StandingGrantPayload } from "../../runtime/schema/StandingGrant.js"
import { StandingGrants } from "../../runtime/ledger/StandingGrants.js"
import { layerMemoryStandingGrants } from "../../runtime/ledger/memory/MemoryStandingGrants.js"
import { standingApprovals } from "../../runtime/loops/StandingApprovals.js"
import { adjudicated, at, decideCtxAt, given, held, proposed, T0 } from "../heldcall/Given.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair, devPublicKey } from "../../runtime/client/DevKeys.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"

// Taking a standing approval's uses under races, on the memory ledger's compare-and-set: the
// same call and generation again gets the use it had (a drive re-run after a conflict, or after
// its process stopped), and calls racing for the last uses never get more than max_uses.
const grant: StandingGrantPayload = {
  op: "standing.grant",
  principal: "user:carol",
  class: "human",
  grant_id: "race",
  scope: { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { any: true }, amount: { any: true } } },
  max_uses: 3,
  issued_at: at(0),
  expires_at: at(7_200_000),
  nonce: "nonce-race-0001"
}
const base = decideCtxAt(1_000)
const ctx = { ...base, keysOf: (p: string) => (p === "user:carol" ? [devPublicKey(p)] : base.keysOf(p)) }
const signed = signEnvelope(grant as unknown as Record<string, unknown>, devKeyPair("user:carol").secretKey)
const parkedAs = (heldId: string): HeldCallFacts => ({ ...given(proposed(1), adjudicated(1), held(1)), held_id: heldId })

const run = <A>(body: Effect.Effect<A, unknown, StandingGrants>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const grants = yield* StandingGrants
      const stored = yield* grants.put({ type: "standing.granted", grant_id: "race", grant_digest: jcsDigest(grant), grant: signed, uses: [], at: at(0) }, 0)
      expect(stored).not.toBeNull()
      return yield* body
    }).pipe(Effect.provide(layerMemoryStandingGrants))
  )

describe("standing uses under races", () => {
  it("the same call asked twice (a re-run drive) gets the same use, and the grant records one", async () => {
    const f = parkedAs("h_" + "1".repeat(32))
    const [a, b, uses] = await run(
      Effect.gen(function* () {
        const a = yield* standingApprovals(f, ctx, T0 + 1_000)
        const b = yield* standingApprovals(f, ctx, T0 + 2_000)
        return [a, b, (yield* (yield* StandingGrants).get("race"))!.record.uses] as const
      })
    )
    expect(a.map((e) => e.use)).toEqual([1])
    expect(b.map((e) => e.use)).toEqual([1])
    expect(uses).toHaveLength(1)
  })

  it("eight calls for a three-use grant (the race itself runs on NATS in test/e2e/StandingApprovals.test.ts): exactly three approved, uses 1..3, each once", async () => {
    const calls = Array.from({ length: 8 }, (_, i) => parkedAs("h_" + String(i).repeat(32)))
    const [results, uses] = await run(
      Effect.gen(function* () {
        const results = yield* Effect.forEach(calls, (f) => standingApprovals(f, ctx, T0 + 1_000), { concurrency: "unbounded" })
        return [results, (yield* (yield* StandingGrants).get("race"))!.record.uses] as const
      })
    )
    const approved = results.flat()
    expect(approved.map((e) => e.use).sort()).toEqual([1, 2, 3])
    expect(new Set(approved.map((e) => e.held_id)).size).toBe(3)
    expect(uses.map((u) => u.held_id).sort()).toEqual(approved.map((e) => e.held_id).sort())
  })
})
