import { Cause, Effect } from "effect"
import { Nats } from "../ledger/Nats.js"
import type { HeldCallStore } from "../ledger/HeldCallStore.js"
import type { Driver } from "../loops/Driver.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { classifyChange, holdsProfile, PolicyApplyTool } from "../policy/PolicyChange.js"
import { Buckets, Subjects } from "../schema/Subjects.js"
import { RequestsInFlight, serveRequests } from "./internal/serveRequests.js"
import { readEventsAfter } from "../ledger/EventLog.js"
import type { HeldEvent } from "../schema/Events.js"
import type { WitnessedSignatures } from "../schema/PolicyApplied.js"

type Deps = Nats | PolicyStore | HeldCallStore | Driver
/** Where an applied change is remembered under its idempotency key (read-back; at most one epoch bump). */
const appliedKey = (idempotencyKey: string) => `applied.${idempotencyKey.replace(/[^A-Za-z0-9_-]/g, "_")}`

/** The generation named by an idempotency key `<held id>:g<generation>` (undefined when it names none). */
const generationOf = (key: string): number | undefined => {
  const m = /:g(\d+)$/.exec(key)
  return m === null ? undefined : Number(m[1])
}

/**
 * The signed proposal of the change's generation and the approvals accepted for it, read from the
 * call's history, to copy into the `policy.applied` record (empty when they cannot be read: the
 * auditor then reads them from the call).
 */
const authorizingSignatures = (heldId: string, generation: number | undefined) =>
  readEventsAfter(heldId, 0).pipe(
    Effect.map((events): { signatures?: WitnessedSignatures } => {
      const proposed = events.map((e) => e.event).filter((e): e is Extract<HeldEvent, { type: "call.proposed" }> => e.type === "call.proposed" && (generation === undefined || e.generation === generation)).at(-1)
      if (proposed?.envelope === undefined) return {}
      const approvals = events
        .map((e) => e.event)
        .filter((e): e is Extract<HeldEvent, { type: "attestation.accepted" }> => e.type === "attestation.accepted" && e.generation === proposed.generation)
        .map((e) => e.envelope)
      return {
        signatures: {
          generation: proposed.generation,
          call_digest: proposed.call_digest,
          ...(proposed.held_id_salt !== undefined ? { held_id_salt: proposed.held_id_salt } : {}),
          proposal: proposed.envelope,
          approvals
        }
      }
    }),
    Effect.orElseSucceed(() => ({}))
  )

/** How long a stopping kernel lets a policy apply it took finish before interrupting it (unanswered: the executor reads back). */
const StopGraceMs = 5_000

/**
 * Serves `kernel_policy_apply` as a tool on the kernel's own connection, so a policy change
 * runs through the held-call path like any effect: dispatched once under a lease, recorded,
 * read back after a crash. The change is re-classified against the policy of this moment.
 * Its subjects are under `wk.v1.kernel.tools.>` (Subjects.toolInvoke of a `kernel_` tool), which
 * only kernel users may use: no tool service can read the profile it carries or answer for it.
 */
export const servePolicyApplyTool = Effect.gen(function* () {
  const { nc, kv } = yield* Nats
  const runtime = yield* Effect.runtime<Deps>()
  const inFlight = new RequestsInFlight()
  const invoke = (req: { idempotency_key?: unknown; args?: { profile?: unknown } }) =>
    Effect.gen(function* () {
      const key = typeof req.idempotency_key === "string" ? req.idempotency_key : ""
      if (key === "") return { ok: false, error: "idempotency_key is required" }
      const bucket = yield* Effect.promise(() => kv(Buckets.policy))
      const done = yield* Effect.promise(() => bucket.get(appliedKey(key)))
      if (done !== null && done.operation === "PUT") return { ok: true, result: done.json<unknown>() }
      const store = yield* PolicyStore
      const policy = yield* store.refresh
      const change = classifyChange(policy, req.args?.profile, "args.profile")
      if (change._tag === "Invalid") return { ok: false, error: change.message }
      const changed = !holdsProfile(policy.profiles, change.profile)
      // The idempotency key is `<held id>:g<generation>` (proposedEvent): the record names the call.
      const heldId = key.split(":")[0]!
      const epoch = changed ? (yield* store.apply(change.profiles, { held_id: heldId, ...(yield* authorizingSignatures(heldId, generationOf(key))) })).epoch : policy.epoch
      const result = { policy_epoch: epoch, profile: change.profile.name }
      yield* Effect.promise(() => bucket.put(appliedKey(key), JSON.stringify(result)))
      return { ok: true, result }
    })
  const readback = (req: { idempotency_key?: unknown }) =>
    Effect.gen(function* () {
      const bucket = yield* Effect.promise(() => kv(Buckets.policy))
      const done = typeof req.idempotency_key === "string" ? yield* Effect.promise(() => bucket.get(appliedKey(req.idempotency_key as string))) : null
      return done !== null && done.operation === "PUT" ? { applied: true, result: done.json<unknown>() } : { applied: false }
    })
  const serve = (subject: string, handler: (req: Record<string, unknown>) => Effect.Effect<unknown, unknown, Deps>) =>
    serveRequests(
      nc,
      runtime,
      inFlight,
      subject,
      (msg) =>
        Effect.try(() => msg.json<Record<string, unknown>>()).pipe(
          Effect.matchEffect({ onFailure: () => Effect.succeed({ ok: false, error: "request is not JSON" }), onSuccess: handler })
        ),
      // Interrupted as the kernel stops: no answer, so the executor reads back what happened.
      (c) => (Cause.isInterruptedOnly(c) ? undefined : { ok: false, error: `policy apply failed: ${String(c)}` })
    )
  const subs = [serve(Subjects.toolInvoke(PolicyApplyTool), invoke), serve(Subjects.toolReadback(PolicyApplyTool), readback)]
  yield* Effect.addFinalizer(() => inFlight.close(subs, StopGraceMs))
})
