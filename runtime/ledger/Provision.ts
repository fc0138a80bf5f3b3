import { Effect } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { randomBytes } from "node:crypto"
import { Objm } from "@nats-io/obj"
import { errors } from "@nats-io/transport-node"
import { ArchiveBucket } from "../schema/Archive.js"
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream"
import { Buckets, Consumers, Streams } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"
import { DefaultRetention, type RetentionConfig } from "./Retention.js"

const TwoMinutesNs = 120 * 1_000_000_000

/**
 * The kernel's own secrets: a KV bucket only the kernel's NATS role may read (nats.conf grants
 * `$KV` to no other role). `held_id` keys held ids (runtime/schema/Canonical.ts `heldIdSaltOf`).
 */
export const KernelSecrets = { bucket: "wk_secrets", heldId: "held_id" } as const

const nanos = (ms: number) => ms * 1_000_000
/** A limit of 0 is none (-1 for bytes in JetStream). */
const bytesLimit = (n: number) => (n > 0 ? n : -1)

/** The limits of the streams that have them (runtime/ledger/Retention.ts says why each). */
export const streamLimits = (r: RetentionConfig) => ({
  [Streams.events]: { max_bytes: bytesLimit(r.eventsMaxBytes), max_age: nanos(r.eventsMaxAgeMs), discard: DiscardPolicy.New },
  [Streams.sessions]: { max_bytes: bytesLimit(r.sessionsMaxBytes), max_age: nanos(r.sessionsMaxAgeMs), discard: DiscardPolicy.Old }
})

/** The streams and buckets the kernel needs. Separate from publish and consume (admin API). */
export const streamConfigs = (replicas = 1, retention: RetentionConfig = DefaultRetention): ReadonlyArray<Partial<StreamConfig> & { name: string }> => [
  {
    name: Streams.events,
    subjects: ["wk.v1.events.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    ...streamLimits(retention)[Streams.events],
    duplicate_window: TwoMinutesNs,
    allow_direct: true,
    // No single event can be deleted, by any user, and no update can take this back. Archiving
    // purges archived calls by subject (so deny_purge stays off).
    deny_delete: true,
    num_replicas: replicas
  },
  {
    // At most one pending wake per held call: the controller's durable to-do list.
    name: Streams.wakes,
    subjects: ["wk.v1.wakes.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    num_replicas: replicas
  },
  {
    // Witness requests (and reminders) kept for witness routes' durable consumers, and the
    // routes' delivery records: a request is work a route finishes, not a notification it may miss.
    name: Streams.witness,
    subjects: ["wk.v1.witness.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(7 * 24 * 3_600_000),
    discard: DiscardPolicy.Old,
    num_replicas: replicas
  },
  {
    name: Streams.sessions,
    subjects: ["wk.v1.sessions.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    ...streamLimits(retention)[Streams.sessions],
    duplicate_window: TwoMinutesNs,
    allow_direct: true,
    num_replicas: replicas
  }
]

/**
 * Creates what is missing and leaves existing streams and buckets (and their data) alone, except
 * for the retention limits, which are brought to the configured values when the NATS user may
 * reconfigure streams (the provisioner; the running kernel's user may not, and the limits it
 * could not change are returned and reported).
 */
export const provision = (replicas = 1, retention: RetentionConfig = DefaultRetention) =>
  Effect.gen(function* () {
    const { jsm, kvm, nc } = yield* Nats
    const unchanged: Array<string> = []
    for (const cfg of streamConfigs(replicas, retention)) {
      yield* Effect.tryPromise({
        try: async () => {
          const info = await jsm.streams.info(cfg.name).catch(() => null)
          if (info === null) return void (await jsm.streams.add(cfg))
          const limits = (streamLimits(retention) as Record<string, { max_bytes: number; max_age: number; discard: DiscardPolicy }>)[cfg.name]
          if (limits === undefined) return
          const c = info.config
          // A stream made before deny_delete was provisioned gets it (it can be added, never removed).
          const denyDelete = cfg.deny_delete === true && c.deny_delete !== true ? { deny_delete: true } : {}
          if (c.max_bytes !== limits.max_bytes || c.max_age !== limits.max_age || c.discard !== limits.discard || "deny_delete" in denyDelete) {
            try {
              await jsm.streams.update(cfg.name, { ...c, ...limits, ...denyDelete })
            } catch (e) {
              // The running kernel's user may not reconfigure the evidence streams (nats.conf):
              // the stream keeps its limits until `wk provision` runs as the provisioner.
              if (!permissionDenied(e)) throw e
              unchanged.push(`${cfg.name} (max_bytes ${c.max_bytes} -> ${limits.max_bytes}, max_age ${c.max_age} -> ${limits.max_age}${"deny_delete" in denyDelete ? ", deny_delete" : ""})`)
            }
          }
        },
        catch: (cause) => new LedgerError({ operation: `provision stream ${cfg.name}`, message: String(cause), cause })
      })
    }
    for (const name of Object.values(Buckets)) {
      yield* Effect.tryPromise({
        try: () => kvm.create(name, { history: 1, replicas, storage: StorageType.File }),
        catch: (cause) => new LedgerError({ operation: `provision bucket ${name}`, message: String(cause), cause })
      })
    }
    yield* Effect.tryPromise({
      try: async () => {
        const exists = await jsm.streams.info(`OBJ_${ArchiveBucket}`).then(() => true, () => false)
        if (!exists) await new Objm(nc).create(ArchiveBucket, { replicas, storage: StorageType.File })
      },
      catch: (cause) => new LedgerError({ operation: `provision object store ${ArchiveBucket}`, message: String(cause), cause })
    })
    yield* Effect.tryPromise({
      try: async () => {
        const kv = await kvm.create(KernelSecrets.bucket, { history: 1, replicas, storage: StorageType.File })
        // Created once: `create` writes only when the key is absent, so racing kernels keep the first.
        await kv.create(KernelSecrets.heldId, randomBytes(32)).catch(() => undefined)
      },
      catch: (cause) => new LedgerError({ operation: "provision the kernel secret", message: String(cause), cause })
    })
    if (unchanged.length > 0) {
      yield* Effect.sync(() =>
        log.warn({ streams: unchanged }, "kept stream limits this NATS user may not reconfigure; run `wk provision` as the provisioner user to apply the configured retention")
      )
    }
    return { unchanged }
  })

/** A JetStream API request refused by the server's permissions (nats.conf). */
const permissionDenied = (e: unknown): boolean => {
  for (let c: unknown = e; c instanceof Error; c = c.cause) if (c instanceof errors.PermissionViolationError || /permissions violation/i.test(c.message)) return true
  return false
}

/** The durable consumer on `WK_WAKES` every kernel process shares: each wake is handled by one of them. */
export const ControllerConsumer = Consumers.controller

/**
 * Creates the controller's consumer when it is missing (an existing one is left as it is):
 * explicit acks, redelivery after `ackWaitMs` without an ack, no delivery limit.
 */
export const ensureControllerConsumer = (ackWaitMs: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    yield* Effect.tryPromise({
      try: async () => {
        const exists = await jsm.consumers.info(Streams.wakes, ControllerConsumer).then(() => true, () => false)
        if (exists) return
        await jsm.consumers.add(Streams.wakes, {
          durable_name: ControllerConsumer,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(ackWaitMs),
          max_ack_pending: -1,
          max_deliver: -1
        })
      },
      catch: (cause) => new LedgerError({ operation: "create controller consumer", message: String(cause), cause })
    })
  })

/** The secret held ids are keyed with (created by `provision`). */
export const readHeldIdSecret = Effect.gen(function* () {
  const { kvm } = yield* Nats
  return yield* Effect.tryPromise({
    try: async () => {
      const e = await (await kvm.open(KernelSecrets.bucket)).get(KernelSecrets.heldId)
      if (e === null || e.operation !== "PUT" || e.value.length < 32) throw new Error(`${KernelSecrets.bucket}.${KernelSecrets.heldId} is missing; provisioning creates it`)
      return e.value
    },
    catch: (cause) => new LedgerError({ operation: "read the held-id secret", message: String(cause), cause })
  })
})
