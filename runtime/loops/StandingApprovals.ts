import { Effect } from "effect"
import type { WitnessRegistry } from "../heldcall/Counting.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { atOf } from "../heldcall/decide/Decision.js"
import { standingApplied, standingRefusal, useFor } from "../heldcall/Standing.js"
import type { LedgerError } from "../schema/LedgerError.js"
import { StandingGrants, type StoredGrant } from "../ledger/StandingGrants.js"
import type { EventOf } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"

/** Attempts at one grant's compare-and-set before leaving it to the witnesses. */
const MaxAttempts = 8

/**
 * Takes one use of a grant for `f`'s current generation: re-read the grant, judge it again on
 * the truth, and store the use with a compare-and-set on the grant's subject. The same call
 * and generation again (a conflict re-run of the drive) gets the use it already had. Null when
 * the grant does not (or no longer) approve the call or its uses are spent.
 */
const takeUse = (grants: StandingGrants["Type"], grantId: string, f: HeldCallFacts, registry: WitnessRegistry, now: number) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < MaxAttempts; attempt++) {
      const g = yield* grants.get(grantId)
      if (g === null || standingRefusal(f, g.record, g.payload, registry, now) !== null) return null
      const had = useFor(g.record.uses, f.held_id, f.generation)
      if (had !== undefined) return { grant: g, use: had }
      const at = atOf({ now })
      const use = { held_id: f.held_id, generation: f.generation, call_digest: canonicalCall(f)!.call_digest, at }
      const stored = yield* grants.put({ ...g.record, type: "standing.used", uses: [...g.record.uses, use], at }, g.seq)
      if (stored !== null) return { grant: stored, use: stored.record.uses.length }
    }
    return null
  })

const byExpiry = (a: StoredGrant, b: StoredGrant) => Date.parse(a.payload.expires_at) - Date.parse(b.payload.expires_at) || (a.record.grant_id < b.record.grant_id ? -1 : 1)

/**
 * The standing approvals for a call just held (`f`: its facts with the hold folded in): for each
 * witness with a grant that covers the call, the grant that expires first takes one use and the
 * call records it as that witness's approval (`standing.applied`). A grant never adds anything
 * but an approval, so a DENY stays a DENY and a veto still ends the call. A use taken for a drive
 * whose commit then loses a conflict is taken again by the re-run (same call, same use); one lost
 * with its process stays spent, never given twice.
 */
export const standingApprovals = (f: HeldCallFacts, registry: WitnessRegistry, now: number): Effect.Effect<ReadonlyArray<EventOf<"standing.applied">>, LedgerError, StandingGrants> =>
  Effect.gen(function* () {
    const call = canonicalCall(f)
    if (f.spec === null || call === null) return []
    const grants = yield* StandingGrants
    const candidates = grants.candidates(call.tool, f.spec.principal).filter((g) => standingRefusal(f, g.record, g.payload, registry, now) === null)
    if (candidates.length === 0) return []
    const events: Array<EventOf<"standing.applied">> = []
    const approved = new Set<string>()
    for (const candidate of [...candidates].sort(byExpiry)) {
      if (approved.has(candidate.payload.principal)) continue
      const taken = yield* takeUse(grants, candidate.record.grant_id, f, registry, now)
      if (taken === null) continue
      approved.add(taken.grant.payload.principal)
      events.push(standingApplied(f, taken.grant.record, taken.grant.payload, taken.use, atOf({ now })))
    }
    return events
  })
