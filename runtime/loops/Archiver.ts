import { Effect, Layer, Schedule } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { KernelConfig } from "../KernelConfig.js"
import { archiveCalls, scanOldCalls } from "../ledger/Archive.js"
import { acquireLease, releaseLease } from "../ledger/Leases.js"
import { commitSigningKey } from "../ledger/CommitSigningKey.js"
import { layerNats, Nats } from "../ledger/Nats.js"

/** One kernel at a time archives (a lease in `wk_leases`); the others skip the pass. */
const ArchiverLease = "archiver"

/**
 * One archive pass: scans `WK_EVENTS` from where the last pass stopped for calls stored before
 * now minus `archiveAfterMs`, and archives the quiescent ones (runtime/ledger/Archive.ts), a batch
 * per object, until the scan reaches newer messages or `maxBatches` objects were written.
 * Returns the records written.
 */
export const makeArchivePass = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const { owner, retention } = yield* KernelConfig
  const key = yield* commitSigningKey
  let from = 0
  return (maxBatches = 20) =>
    Effect.gen(function* () {
      const written = []
      const cutoff = clock.unsafeCurrentTimeMillis() - retention.archiveAfterMs
      for (let i = 0; i < maxBatches; i++) {
        const scan = yield* scanOldCalls(from, cutoff, retention.archiveBatch)
        from = scan.next
        const record = scan.ids.length === 0 ? null : yield* archiveCalls(scan.ids, cutoff, owner, key)
        if (record !== null) written.push(record)
        if (scan.next === 0) break
      }
      return written
    })
})

/**
 * Runs archive passes every `archiveIntervalMs` under the archiver lease, until the scope closes,
 * over a connection of the retention login (the kernel's own may not purge `WK_EVENTS`); without
 * that login configured nothing is archived.
 */
export const runArchiver = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const { owner, retention } = yield* KernelConfig
  if (retention.archiveAfterMs <= 0) return
  if (retention.login === undefined) {
    log.warn({ loop: "archiver" }, "archiving is off: no retention login (WK_RETENTION_USER, WK_RETENTION_PASS); the kernel's own login may not purge WK_EVENTS")
    return
  }
  const { nc } = yield* Nats
  // One server of the kernel's is enough: the client learns the rest of a cluster from it.
  const retentionNats = yield* Layer.build(layerNats({ servers: nc.getServer(), ...retention.login, name: "wk-retention" }))
  const pass = yield* makeArchivePass
  const once = Effect.gen(function* () {
    const ttl = Math.max(60_000, retention.archiveIntervalMs)
    const taken = yield* acquireLease(ArchiverLease, owner, ttl, clock.unsafeCurrentTimeMillis())
    if (!("lease" in taken)) return
    yield* pass().pipe(Effect.ensuring(releaseLease(taken.lease).pipe(Effect.ignore)))
  }).pipe(
    Effect.catchAll((e) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "archiver" }), log.error({ loop: "archiver", ...errorFields(e) }, "archive pass failed"))))
  )
  yield* Effect.forkScoped(Effect.repeat(Effect.provide(once, retentionNats), Schedule.spaced(`${Math.max(1, retention.archiveIntervalMs)} millis`)))
})
