import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Layer } from "effect"
import { jetstreamManager } from "@nats-io/jetstream"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { layerNatsReadNonces, ReadNonceBucket, ReadNonces, ReadNonceTtlMs } from "../../runtime/ledger/ReadNonces.js"
import { ReadProofWindowMs } from "../../runtime/protocol/ReadProof.js"
import { connectAs } from "../support/Principals.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"

// The nonces of signed reads, as two kernel processes see them: each over its own connection,
// one KV bucket between them, a nonce accepted by one refused by the other, and forgotten only
// after the bucket's TTL.
let nats: TestNats
beforeAll(async () => {
  nats = await startTestNats()
})
afterAll(async () => {
  await nats?.dispose()
})

/** `firstUse` as a kernel process would call it: over a NATS connection of its own (a new one per call). */
const kernelProcess = () => {
  const layer = layerNatsReadNonces.pipe(Layer.provide(layerNats({ servers: nats.servers, ...Roles.kernel })))
  return (scope: ReadonlyArray<string>) => Effect.runPromise(Effect.scoped(Effect.flatMap(ReadNonces, (r) => r.firstUse(scope))).pipe(Effect.provide(layer)))
}

describe("read nonces shared by every kernel", () => {
  it("a nonce one kernel accepted is refused by another, and by itself; another nonce, principal or per-kernel scope is new", async () => {
    const one = kernelProcess()
    const two = kernelProcess()
    expect(await one(["read", "user:carol", "n0nce-shared-1"])).toBe(true)
    expect(await two(["read", "user:carol", "n0nce-shared-1"])).toBe(false)
    expect(await one(["read", "user:carol", "n0nce-shared-1"])).toBe(false)
    expect(await two(["read", "user:carol", "n0nce-shared-2"])).toBe(true)
    expect(await two(["read", "user:dave", "n0nce-shared-1"])).toBe(true)
    // Health: every kernel answers the same read, each once.
    expect(await one(["read", "user:carol", "n0nce-health", "kernel-a"])).toBe(true)
    expect(await two(["read", "user:carol", "n0nce-health", "kernel-b"])).toBe(true)
    expect(await two(["read", "user:carol", "n0nce-health", "kernel-b"])).toBe(false)
  })

  it("the bucket forgets a nonce after its TTL, twice the window a read's issued_at is accepted in", async () => {
    const nc = await connectAs(nats.servers, "kernel")
    try {
      const info = await (await jetstreamManager(nc)).streams.info(`KV_${ReadNonceBucket}`)
      expect(info.config.max_age).toBe(ReadNonceTtlMs * 1_000_000)
      expect(ReadNonceTtlMs).toBe(2 * ReadProofWindowMs)
    } finally {
      await nc.close()
    }
  })
})
