import { Effect, Layer, Ref, Schedule, Schema, Stream } from "effect"
import { log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { Nats } from "./Nats.js"
import { LedgerError, isWrongLastSequence } from "../schema/LedgerError.js"
import { jcsDigest } from "../schema/Canonical.js"
import { Profile } from "../schema/Profile.js"
import { AppliedBy, policyAppliedId, type PolicyApplied } from "../schema/PolicyApplied.js"
import { Buckets, Streams, Subjects } from "../schema/Subjects.js"
import { activePolicy } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"

/** What the policy bucket holds under `active`: the epoch and the profile documents in force. */
const StoredPolicy = Schema.Struct({
  epoch: Schema.Int,
  profiles: Schema.Array(Profile),
  /** Digest of the profile files last applied at start-up (files changed -> new epoch). */
  source_digest: Schema.String,
  /**
   * The signed `policy.apply` envelopes applied while they are unexpired, by principal and nonce,
   * with the epoch each made: the same envelope again is a duplicate. Written with the profiles,
   * so an apply and its nonce are recorded together or not at all.
   */
  applies: Schema.optional(Schema.Array(Schema.Struct({ principal: Schema.String, nonce: Schema.String, epoch: Schema.Int, expires_at: Schema.String }))),
  /**
   * Who applied this epoch, as its `policy.applied` record names it. Kept with the profiles so
   * that any kernel can write the record when the one that applied the change died before it did.
   */
  applied_by: Schema.optional(AppliedBy)
})
type StoredPolicy = typeof StoredPolicy.Type

const Key = "active"
const decode = Schema.decodeUnknownSync(StoredPolicy)
const encode = (p: StoredPolicy) => new TextEncoder().encode(JSON.stringify(p))

/**
 * Loads the policy, seeding the bucket from `fileProfiles` when it is empty or when the files
 * changed since they were last applied; a policy applied over NATS otherwise survives restarts.
 */
export const makePolicyStore = (fileProfiles: ReadonlyArray<Profile>) =>
  Effect.gen(function* () {
    const nats = yield* Nats
    const sourceDigest = jcsDigest(fileProfiles)
    const kv = yield* Effect.tryPromise({
      try: () => nats.kv(Buckets.policy),
      catch: (cause) => new LedgerError({ operation: "open policy bucket", message: String(cause), cause })
    })
    const read = Effect.tryPromise({
      try: async () => {
        const e = await kv.get(Key)
        return e === null || e.operation !== "PUT" ? null : { stored: decode(e.json()), revision: e.revision }
      },
      catch: (cause) => new LedgerError({ operation: "read policy", message: String(cause), cause })
    })
    const write = (next: (prev: StoredPolicy | null) => StoredPolicy | null) =>
      Effect.tryPromise({
        try: async (): Promise<StoredPolicy> => {
          for (;;) {
            const e = await kv.get(Key)
            const prev = e === null || e.operation !== "PUT" ? null : decode(e.json())
            const value = next(prev)
            if (value === null) return prev!
            try {
              if (e === null || e.operation !== "PUT") await kv.create(Key, encode(value))
              else await kv.update(Key, encode(value), e.revision)
              return value
            } catch (err) {
              if (!isWrongLastSequence(err)) throw err
            }
          }
        },
        catch: (cause) => new LedgerError({ operation: "write policy", message: String(cause), cause })
      })

    // The registry's history for auditors: one `policy.applied` record per epoch, after its KV
    // write and before any kernel decides under it (`adopt`). Deduplicated by its event id, so the
    // kernel that applied the change and every kernel that sees it may each write it.
    const recordApplied = (s: StoredPolicy, onlyIfMissing: boolean) =>
      Effect.tryPromise({
        try: async () => {
          if (onlyIfMissing) {
            const last = await nats.jsm.direct.getMessage(Streams.events, { last_by_subj: Subjects.policyEvents })
            if (last !== null && Number((last.json() as { epoch?: unknown }).epoch ?? 0) >= s.epoch) return
          }
          const record: PolicyApplied = { type: "policy.applied", event_id: policyAppliedId(s.epoch), epoch: s.epoch, profiles: s.profiles, at: new Date().toISOString(), ...(s.applied_by !== undefined ? { applied_by: s.applied_by } : {}) }
          await nats.js.publish(Subjects.policyEvents, new TextEncoder().encode(JSON.stringify(record)), { msgID: record.event_id })
        },
        catch: (cause) => new LedgerError({ operation: "record policy.applied", message: String(cause), cause })
      })

    const seeded = yield* write((prev) =>
      prev === null
        ? { epoch: 1, profiles: fileProfiles, source_digest: sourceDigest }
        : prev.source_digest === sourceDigest
          ? null
          : { epoch: prev.epoch + 1, profiles: fileProfiles, source_digest: sourceDigest }
    )
    yield* recordApplied(seeded, true)
    const ref = yield* Ref.make(activePolicy(seeded.epoch, seeded.profiles))
    const set = (s: StoredPolicy) =>
      Ref.updateAndGet(ref, (cur) => (s.epoch > cur.epoch ? activePolicy(s.epoch, s.profiles) : cur))
    /**
     * Puts in force an epoch another process wrote, after making sure its record is in the
     * stream: its writer may have died between the KV write and the record, and a decision under
     * an epoch must never precede that epoch's record. If the record cannot be written (NATS
     * away), the epoch is put in force anyway after a few tries: the policy in the bucket rules.
     */
    const adopt = (s: StoredPolicy) =>
      Effect.flatMap(Ref.get(ref), (cur) =>
        s.epoch <= cur.epoch
          ? Effect.succeed(cur)
          : recordApplied(s, true).pipe(
              Effect.retry(Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(5)))),
              Effect.catchAll((e) => Effect.sync(() => log.warn({ loop: "policy-watch", epoch: s.epoch, err: e.message }, "the policy.applied record could not be written; the epoch is put in force"))),
              Effect.zipRight(set(s))
            )
      )

    // Follow changes made by other processes.
    const watcher = yield* Effect.tryPromise({
      try: () => kv.watch({ key: Key }),
      catch: (cause) => new LedgerError({ operation: "watch policy", message: String(cause), cause })
    })
    // A supervised fiber of this scope. Its finalizer (stopping the watch) runs before the fiber
    // is interrupted, so the iterator ends instead of waiting for a change that may never come.
    yield* Stream.fromAsyncIterable(watcher, (cause) => new LedgerError({ operation: "watch policy", message: String(cause), cause })).pipe(
      Stream.filter((e) => e.operation === "PUT"),
      Stream.runForEach((e) =>
        Effect.try({ try: () => decode(e.json()), catch: (cause) => cause }).pipe(
          Effect.flatMap(adopt),
          // A document that does not decode is ignored; the previous policy stays in force.
          Effect.catchAll((cause) => Effect.sync(() => {
            kernelMetrics.defects.inc({ loop: "policy-watch" })
            log.warn({ loop: "policy-watch", err: String(cause).slice(0, 300) }, "a policy document does not decode; the policy in force stays")
          }))
        )
      ),
      Effect.catchAllCause((cause) => Effect.sync(() => {
        kernelMetrics.defects.inc({ loop: "policy-watch" })
        log.error({ loop: "policy-watch", err: String(cause) }, "policy watch stopped")
      })),
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => watcher.stop()))

    return PolicyStore.of({
      current: Ref.get(ref),
      refresh: Effect.flatMap(read, (r) => (r === null ? Ref.get(ref) : adopt(r.stored))),
      apply: (profiles, appliedBy) =>
        Effect.flatMap(
          write((prev) => ({ epoch: (prev?.epoch ?? 0) + 1, profiles, source_digest: prev?.source_digest ?? sourceDigest, ...(prev?.applies ? { applies: prev.applies } : {}), ...(appliedBy !== undefined ? { applied_by: appliedBy } : {}) })),
          (s) => Effect.zipRight(recordApplied(s, false), set(s))
        ),
      applyOnce: (profiles, env, appliedBy) =>
        Effect.gen(function* () {
          let duplicate: number | undefined
          const s = yield* write((prev) => {
            const now = Date.now()
            const seen = (prev?.applies ?? []).find((a) => a.principal === env.principal && a.nonce === env.nonce)
            duplicate = seen?.epoch
            if (seen !== undefined) return null
            const epoch = (prev?.epoch ?? 0) + 1
            // Expired envelopes are refused anyway: their nonces need not be kept.
            const applies = [...(prev?.applies ?? []).filter((a) => Date.parse(a.expires_at) > now), { principal: env.principal, nonce: env.nonce, epoch, expires_at: env.expires_at }]
            return { epoch, profiles, source_digest: prev?.source_digest ?? sourceDigest, applies, ...(appliedBy !== undefined ? { applied_by: appliedBy } : {}) }
          })
          if (duplicate !== undefined) return { policy: yield* set(s), duplicate }
          yield* recordApplied(s, false)
          return { policy: yield* set(s) }
        })
    })
  })

export const layerPolicyStore = (fileProfiles: ReadonlyArray<Profile>) => Layer.scoped(PolicyStore, makePolicyStore(fileProfiles))
