import { Effect } from "effect"
import { Driver } from "../loops/Driver.js"
import { KernelConfig } from "../KernelConfig.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { admittedWitnesses } from "../heldcall/Reconciler.js"
import { classesOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { jcsDigest } from "../schema/Canonical.js"
import type { EffectSettled } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { SettlePayload } from "../schema/Requests.js"
import type { Envelope } from "../schema/Envelope.js"
import type { Reply } from "./Replies.js"
import { appendDecided, type Decided } from "./internal/appendDecided.js"
import { signedRequest } from "./Request.js"
import { SkewMs } from "./Attest.js"

type Judged = { readonly authority: "witness" | "admin" } | { readonly status: 403 | 409 | 422; readonly disposition: "forbidden" | "stale" | "invalid"; readonly reason: string }

/**
 * Who may settle an unknown outcome: a policy admin (a determination), or a read-back witness
 * the call's contract admits or the tool's rule names in `readback_witnesses`; never the proposer.
 */
export const judgeSettle = (f: HeldCallFacts, p: SettlePayload, env: Envelope, policy: ActivePolicy, now: number): Judged => {
  const spec = f.spec!
  if (f.execution !== "outcome-unknown") return { status: 409, disposition: "stale", reason: `the call's outcome is not unknown (execution: ${f.execution})` }
  if (p.generation !== f.generation) return { status: 409, disposition: "stale", reason: `bound to generation ${p.generation}; the current generation is ${f.generation}` }
  if (p.call_digest !== canonicalCall(f)?.call_digest) return { status: 409, disposition: "stale", reason: "bound to another call digest" }
  if (Date.parse(p.expires_at) <= now) return { status: 422, disposition: "invalid", reason: `settlement expired at ${p.expires_at}` }
  if (Date.parse(p.issued_at) > now + SkewMs) return { status: 422, disposition: "invalid", reason: `issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)` }
  if (p.principal === spec.principal || (policy.principals.get(spec.principal)?.keys ?? []).includes(env.key)) {
    return { status: 422, disposition: "invalid", reason: "the proposer cannot settle its own call's outcome" }
  }
  if (policy.admins.has(p.principal)) return { authority: "admin" }
  const classes = classesOf(policy, p.principal)
  const contract = f.witness_contract === null ? { classes: [], principals: [] } : admittedWitnesses(f.witness_contract)
  const named = policy.rules.get(canonicalCall(f)!.tool)?.readback_witnesses
  const admits = (n: { readonly classes?: ReadonlyArray<string>; readonly principals?: ReadonlyArray<string> }) =>
    (n.principals ?? []).includes(p.principal) || classes.some((c) => (n.classes ?? []).includes(c))
  if (admits(contract) || (named !== undefined && admits(named))) return { authority: "witness" }
  return { status: 403, disposition: "forbidden", reason: `principal '${p.principal}' is not a read-back witness of this call (contract or the tool's readback_witnesses) nor a policy admin` }
}

/**
 * `wk.v1.held.settle`: a signed read-back attestation or admin determination of whether an
 * unknown outcome happened. Recorded as `effect.settled`, which ends the call like a recorded
 * effect; the call is then driven (result admission, delivery to the agent).
 */
export const settle = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope, policy } = yield* signedRequest(data, "settle", SettlePayload)
    const digest = jcsDigest(p)
    const eventId = `effect.settled:${p.held_id}:${digest}`
    const { reply } = yield* appendDecided(p.held_id, (f): Decided => {
      if (f.seen.includes(eventId)) return { reply: { status: 200, disposition: "duplicate" } }
      const j = judgeSettle(f, p, envelope, policy, Date.now())
      if (!("authority" in j)) return { reply: { status: j.status, disposition: j.disposition, reason: j.reason } }
      const event = eventOf<typeof EffectSettled.Type>({
        held_id: p.held_id,
        generation: f.generation,
        type: "effect.settled",
        event_id: eventId,
        idempotency_key: f.spec!.idempotency_key,
        by: p.principal,
        authority: j.authority,
        decision: p.decision,
        ...(p.result !== undefined ? { result: p.result } : {}),
        ...(p.reason !== undefined ? { reason: p.reason } : {}),
        attestation_digest: digest,
        envelope
      })
      return { reply: { status: 202, disposition: "accepted", authority: j.authority } satisfies Reply, event }
    })
    if (reply.status === 202 || reply["disposition"] === "duplicate") {
      const driver = yield* Driver
      const cfg = yield* KernelConfig
      yield* Effect.forkDaemon(driver.drive(p.held_id, "fresh").pipe(Effect.ignore))
      yield* wake(p.held_id, { owner: cfg.owner, until: Date.now() + cfg.leaseMs })
    }
    return reply
  })
