import { Effect } from "effect"
import { DiscardPolicy, RetentionPolicy, StorageType, type StreamConfig } from "@nats-io/jetstream"
import { Buckets, Streams } from "../schema/Subjects.js"
import { LedgerError } from "./LedgerError.js"
import { Nats } from "./Nats.js"

const TwoMinutesNs = 120 * 1_000_000_000

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
  })
