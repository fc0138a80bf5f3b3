import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream"
import { Buckets, Streams } from "../schema/Subjects.js"
import { LedgerError } from "./LedgerError.js"
import { Nats } from "./Nats.js"

const TwoMinutesNs = 120 * 1_000_000_000

/**
 * The kernel's own secrets: a KV bucket only the kernel's NATS role may read (nats.conf grants
 * `$KV` to no other role). `held_id` keys held ids (runtime/schema/Canonical.ts `heldIdSaltOf`).
 */
export const KernelSecrets = { bucket: "wk_secrets", heldId: "held_id" } as const

/** The streams and buckets the kernel needs. Separate from publish and consume (admin API). */
export const streamConfigs = (replicas = 1): ReadonlyArray<Partial<StreamConfig> & { name: string }> => [
  {
    name: Streams.events,
    subjects: ["wk.v1.events.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    duplicate_window: TwoMinutesNs,
    allow_direct: true,
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
    name: Streams.sessions,
    subjects: ["wk.v1.sessions.>"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    duplicate_window: TwoMinutesNs,
    allow_direct: true,
    num_replicas: replicas
  }
]

/** Creates what is missing; leaves existing streams and buckets (and their data) alone. */
export const provision = (replicas = 1) =>
  Effect.gen(function* () {
    const { jsm, kvm } = yield* Nats
    for (const cfg of streamConfigs(replicas)) {
      yield* Effect.tryPromise({
        try: async () => {
          const exists = await jsm.streams.info(cfg.name).then(() => true, () => false)
          if (!exists) await jsm.streams.add(cfg)
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
        const kv = await kvm.create(KernelSecrets.bucket, { history: 1, replicas, storage: StorageType.File })
        // Created once: `create` writes only when the key is absent, so racing kernels keep the first.
        await kv.create(KernelSecrets.heldId, randomBytes(32)).catch(() => undefined)
      },
      catch: (cause) => new LedgerError({ operation: "provision the kernel secret", message: String(cause), cause })
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
