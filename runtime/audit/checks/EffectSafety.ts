import { countingApprovals, mayDispatch, vetoOf, type ReconcileContext } from "../../heldcall/Reconciler.js"
import { satisfies } from "../../heldcall/WitnessRuleEval.js"
import { unmetEvidenceTerms } from "../../heldcall/Counting.js"
import { classesOf, keysOf } from "../../policy/ActivePolicy.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { collector, type HeldCheck } from "./Check.js"

/** Why `mayDispatch` refused: the first failing condition of invariant 2, for the report. */
const whyNot = (f: HeldCallFacts, ctx: ReconcileContext): string => {
  if (f.spec === null) return "no proposal"
  if (f.lifecycle !== "open") return `lifecycle was ${f.lifecycle}`
  if (f.execution !== "none" && f.execution !== "leased") return `execution was ${f.execution}`
  if (f.execution === "leased" && f.lease_until !== null && Date.parse(f.lease_until) > ctx.now) return `another worker (${f.lease_owner}) held a live lease`
  if (f.readiness !== "satisfied") return `readiness was ${f.readiness} for generation ${f.generation}`
  if (f.policy_epoch_checked !== ctx.policyEpoch) return `evidence was checked under epoch ${f.policy_epoch_checked}, the dispatch claims epoch ${ctx.policyEpoch}`
  if (f.policy_epoch > ctx.policyEpoch) return `the call had seen epoch ${f.policy_epoch}, newer than the dispatch's ${ctx.policyEpoch}`
  if (Date.parse(f.spec.expires_at) <= ctx.now) return `the call had expired at ${f.spec.expires_at}`
  if (f.verdict === "REQUIRE_WITNESS") {
    if (f.active_rule === null) return "no witness rule in force"
    if (vetoOf(f, ctx) !== undefined) return "a veto was in force"
    if (!satisfies(f.active_rule, countingApprovals(f, ctx))) return "the counting approvals did not satisfy the witness rule"
    const unmet = unmetEvidenceTerms(f, ctx)
    if (unmet.length > 0) return `evidence term${unmet.length === 1 ? "" : "s"} ${unmet.map((t) => `'${t.name}'`).join(", ")} not met`
  } else if (f.verdict !== "ALLOW") return `verdict was ${f.verdict}`
  return "refused"
}

/**
 * `effect-safety` (invariants 1, 2 and the outcome-unknown rule):
 * - every `effect.dispatched` passes the kernel's own `mayDispatch` on the facts just before it
 *   (its own lease aside), at its time, for its generation, under the epoch it claims, and that
 *   epoch is the one in force at that point of the log;
 * - at most one `effect.recorded` per idempotency key, and only the call's own key;
 * - a key is dispatched again only after a read-back found the effect absent, the request
 *   reached no tool service (`effect.unreached`) or the tool is declared idempotent; an unknown
 *   outcome not yet settled by read-back, a read-back witness or an admin is reported as unverified, not passed.
 */
export const effectSafety: HeldCheck = {
  name: "effect-safety",
  run: (call, ctx) => {
    const c = collector("effect-safety", call.heldId)
    const recorded = new Map<string, Array<number>>()
    /** Per key: the last dispatch not yet shown absent by a read-back (seq), or null. */
    const inFlight = new Map<string, number | null>()
    const unknown = new Map<string, number>()
    for (const { seq, event, before, fresh } of call.steps) {
      if (!fresh) continue
      switch (event.type) {
        case "effect.dispatched": {
          c.count()
          const key = event.idempotency_key
          if (before.spec !== null && key !== before.spec.idempotency_key) c.fail([seq], `dispatched under key ${key}, not the call's key ${before.spec.idempotency_key}`)
          if (event.generation !== before.generation) c.fail([seq], `dispatched for generation ${event.generation} while the call was at generation ${before.generation}`)
          const prior = inFlight.get(key)
          if (prior !== undefined && prior !== null) c.fail([prior, seq], `key ${key} dispatched again without a read-back showing the first dispatch absent (blind retry)`)
          if (recorded.has(key)) c.fail([...recorded.get(key)!, seq], `key ${key} dispatched after its effect was recorded`)
          inFlight.set(key, seq)
          // The dispatching worker's own claim is not a competing lease.
          const own = before.execution === "leased" && before.lease_owner === event.owner ? { ...before, execution: "none" as const, lease_owner: null, lease_until: null } : before
          const epoch = ctx.policy.byEpoch(event.policy_epoch) ?? ctx.policy.around(event.at).at(-1)
          if (epoch === undefined) c.unsure([seq], `no policy record for epoch ${event.policy_epoch}: witness classes taken from the evidence as claimed`)
          const claimed = (p: string) => before.evidence.filter((e) => e.witness === p)
          const rctx: ReconcileContext = {
            now: Date.parse(event.at),
            policyEpoch: event.policy_epoch,
            classesOf: (p) => (epoch ? classesOf(epoch.policy, p) : claimed(p).map((e) => e.class)),
            keysOf: (p) => (epoch ? keysOf(epoch.policy, p) : claimed(p).map((e) => e.key)),
            principals: () => (epoch ? [...epoch.policy.principals.keys()] : [...new Set(before.evidence.map((e) => e.witness))]),
            ...(epoch ? { namespaceOf: (p: string) => epoch.policy.principals.get(p)?.namespace } : {})
          }
          if (!mayDispatch(own, rctx)) c.fail([seq], `dispatched although invariant 2 did not hold: ${whyNot(own, rctx)}`)
          const current = ctx.policy.at(seq, event.at)
          if (current !== undefined && current.epoch !== event.policy_epoch) {
            const near = ctx.policy.around(event.at).some((e) => e.epoch === event.policy_epoch)
            const msg = `dispatched under epoch ${event.policy_epoch} while epoch ${current.epoch} was in force`
            if (near) c.unsure([seq], `${msg} (within ${ctx.policy.skewMs} ms of the change)`)
            else c.fail([seq], msg)
          }
          break
        }
        case "effect.readback":
          if (!event.applied) inFlight.set(event.idempotency_key, null)
          unknown.delete(event.idempotency_key)
          break
        case "effect.outcome_unknown":
          unknown.set(event.idempotency_key, seq)
          break
        case "effect.unreached":
          // The request reached no tool service: nothing is in flight under the key.
          inFlight.set(event.idempotency_key, null)
          break
        case "effect.resend":
          // The tool's rule declares it idempotent: sending the same key again cannot apply it twice.
          inFlight.set(event.idempotency_key, null)
          unknown.delete(event.idempotency_key)
          break
        case "effect.settled": {
          // A read-back witness's or an admin's signed statement records the effect.
          const seqs = recorded.get(event.idempotency_key) ?? []
          seqs.push(seq)
          recorded.set(event.idempotency_key, seqs)
          if (seqs.length >= 2) c.fail(seqs, `more than one effect recorded for idempotency key ${event.idempotency_key}`)
          unknown.delete(event.idempotency_key)
          break
        }
        case "effect.recorded": {
          const seqs = recorded.get(event.idempotency_key) ?? []
          seqs.push(seq)
          recorded.set(event.idempotency_key, seqs)
          if (seqs.length === 2) c.fail(seqs, `more than one effect recorded for idempotency key ${event.idempotency_key}`)
          else if (seqs.length > 2) c.fail([seq], `another effect recorded for idempotency key ${event.idempotency_key}`)
          if (!inFlight.has(event.idempotency_key)) c.fail([seq], `effect recorded for key ${event.idempotency_key}, which was never dispatched`)
          unknown.delete(event.idempotency_key)
          break
        }
        case "attestation.accepted":
          // A witness statement after an unknown outcome is how a tool without read-back is settled.
          for (const [key, s] of unknown) if (s < seq && before.needs_witness) unknown.delete(key)
          break
        default:
          break
      }
    }
    for (const [key, s] of unknown) c.unsure([s], `outcome of key ${key} is still unknown (no read-back or witness yet)`)
    return c.done()
  }
}
