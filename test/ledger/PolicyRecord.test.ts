import { it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { describe, expect } from "vitest"
import { layerNats, Nats } from "../../runtime/ledger/Nats.js"
import { layerPolicyStore } from "../../runtime/ledger/NatsPolicyStore.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { PolicyStore } from "../../runtime/policy/PolicyStore.js"
import { Buckets, Streams, Subjects } from "../../runtime/schema/Subjects.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, Roles } from "../support/TestNats.js"
import { eventually } from "../support/Stream.js"

// Every epoch's `policy.applied` record is in the stream before any kernel decides under that
// epoch, even when the kernel that applied the change died between its KV write and the record
// (as the soak's kernel kills can make it): a kernel that sees the new epoch writes the record first.

const org = (marker: string): Profile => ({ name: "org", layer: "organization", principals: {}, grants: { "agent:alice": [marker] }, admins: ["admin:root"] })

describe("policy.applied records", () => {
  it.scopedLive(
    "an epoch whose writer died before its record is recorded, with who applied it, before this kernel puts it in force",
    () =>
      Effect.gen(function* () {
        const server = yield* Effect.acquireRelease(Effect.promise(() => startTestNats()), (s) => Effect.promise(() => s.dispose()))
        const conn = layerNats({ servers: server.servers, ...Roles.kernel, name: "policy-record-test" })
        const layer = layerPolicyStore([org("tool_a")]).pipe(Layer.provide(Layer.effectDiscard(provision()).pipe(Layer.provide(conn))), Layer.provideMerge(conn))
        yield* Effect.gen(function* () {
          const store = yield* PolicyStore
          const { kv, jsm } = yield* Nats
          expect((yield* store.current).epoch).toBe(1)
          // Given: another kernel wrote epoch 2 to the bucket, signed for by a held call, and died.
          const bucket = yield* Effect.promise(() => kv(Buckets.policy))
          const active = (yield* Effect.promise(() => bucket.get("active")))!
          const stored = active.json<Record<string, unknown>>()
          const appliedBy = { held_id: "h_00000000000000000000000000000001" }
          yield* Effect.promise(() => bucket.update("active", JSON.stringify({ ...stored, epoch: 2, profiles: [org("tool_b")], applied_by: appliedBy }), active.revision))
          // When this kernel sees it (its watch), then epoch 2 is in force ...
          yield* Effect.promise(() => eventually(async () => (await Effect.runPromise(store.current)).epoch === 2, 10_000))
          // ... and its record was written first, naming who applied it.
          const last = yield* Effect.promise(() => jsm.direct.getMessage(Streams.events, { last_by_subj: Subjects.policyEvents }))
          const record = last!.json<{ epoch: number; applied_by?: unknown; profiles: ReadonlyArray<Profile> }>()
          expect(record.epoch).toBe(2)
          expect(record.applied_by).toEqual(appliedBy)
          expect(record.profiles[0]!.grants).toEqual({ "agent:alice": ["tool_b"] })
          // And the store's own apply records its epoch once, with its author.
          const applied = yield* store.apply([org("tool_c")], { held_id: "h_00000000000000000000000000000002" })
          expect(applied.epoch).toBe(3)
          const records: Array<number> = []
          const info = yield* Effect.promise(() => jsm.streams.info(Streams.events, { subjects_filter: Subjects.policyEvents }))
          expect(info.state.subjects?.[Subjects.policyEvents]).toBe(3)
          for (let seq = 1; seq <= info.state.last_seq; seq++) {
            const m = yield* Effect.promise(() => jsm.direct.getMessage(Streams.events, { seq }).catch(() => null))
            if (m !== null && m.subject === Subjects.policyEvents) records.push(m.json<{ epoch: number }>().epoch)
          }
          expect(records).toEqual([1, 2, 3])
        }).pipe(Effect.provide(layer))
      }),
    60_000
  )
})
