// Plugins in JetStream's object store: every kernel process loads the same bytes by digest.
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { layerHostEnvMemory } from "../../runtime/plugins/HostEnv.js"
import { layerPluginHost, PluginHost } from "../../runtime/plugins/PluginHost.js"
import { layerPluginAdjudicator, layerPlugins } from "../../runtime/plugins/Pipeline.js"
import { layerHostEnvKv } from "../../runtime/plugins/HostEnvKv.js"
import { Kvm } from "@nats-io/kv"
import { layerPluginSourceObjectStore, loadPluginBytes, loadPluginManifest, publishPlugin } from "../../runtime/ledger/PluginStore.js"
import { artifact, Now, pinOf, policyWith, proposal } from "./support.js"

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

let server: ChildProcess | undefined
let nc: NatsConnection
let storeDir: string

beforeAll(async () => {
  const port = await freePort()
  storeDir = mkdtempSync(join(tmpdir(), "wk-plugin-store-"))
  server = spawn("/usr/sbin/nats-server", ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], { stdio: "ignore" })
  for (let i = 0; ; i++) {
    try {
      nc = await connect({ servers: `127.0.0.1:${port}` })
      break
    } catch (e) {
      if (i > 50) throw e
      await new Promise((r) => setTimeout(r, 100))
    }
  }
})

afterAll(async () => {
  await nc?.close()
  // Wait for the server to exit: it may still be writing its store while we remove it.
  if (server !== undefined && server.exitCode === null) {
    const exited = new Promise((resolve) => server!.once("exit", resolve))
    server.kill("SIGTERM")
    await exited
  }
  rmSync(storeDir, { recursive: true, force: true })
})

describe("plugin object store", () => {
  it.effect("publishes by digest and loads the same bytes and manifest back", () =>
    Effect.gen(function* () {
      const a = artifact("spend-limit")
      const digest = yield* publishPlugin(nc, a.bytes, a.manifest)
      expect(digest).toBe(a.manifest!.manifest.sha256)
      expect(yield* publishPlugin(nc, a.bytes, a.manifest)).toBe(digest)
      expect(Buffer.from((yield* loadPluginBytes(nc, digest))!).equals(Buffer.from(a.bytes))).toBe(true)
      expect(yield* loadPluginManifest(nc, digest)).toEqual(a.manifest)
      expect(yield* loadPluginBytes(nc, "0".repeat(64))).toBeNull()
    })
  )

  it.scoped("the host loads pinned plugins from the store; a missing digest refuses to load", () =>
    Effect.gen(function* () {
      const a = artifact("spend-limit")
      yield* publishPlugin(nc, a.bytes, a.manifest)
      const pin = pinOf("spend-limit", { config: { rules: { "payments.transfer": { amount_field: "amount", witness_above: 10 } } } })
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 50 }), policy: policyWith([pin]), now: Now })
      expect(r.verdict).toBe("REQUIRE_WITNESS")
      const host = yield* PluginHost
      const missing = yield* Effect.flip(host.load({ ...pin, sha256: "1".repeat(64) }))
      expect(missing.problem).toBe("not_found")
    }).pipe(
      Effect.provide(
        Layer.suspend(() => layerPluginAdjudicator.pipe(Layer.provideMerge(Layer.mergeAll(layerPluginHost.pipe(Layer.provide(layerPluginSourceObjectStore(nc))), layerHostEnvMemory()))))
      )
    )
  )

  it.scoped("kv host reads come from a NATS KV bucket", () =>
    Effect.gen(function* () {
      const a = artifact("daily-cap")
      yield* publishPlugin(nc, a.bytes, a.manifest)
      const adj = yield* Adjudicator
      const dailyCap = pinOf("daily-cap", { config: { tools: ["payments.transfer"], default_cap: 5000 } })
      const r = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 50 }), policy: policyWith([dailyCap]), now: Now })
      expect(r.verdict).toBe("REQUIRE_WITNESS")
      expect(r.reasons[0]!.reason).toBe("daily spend 60 + 50 would pass the daily cap 100")
    }).pipe(
      Effect.provide(
        Layer.unwrapEffect(
          Effect.promise(async () => {
            const kv = await new Kvm(nc).create("wk_plugin_test")
            await kv.put("limits/daily/alice", "100")
            return layerPlugins(layerPluginSourceObjectStore(nc), layerHostEnvKv(kv, (name, principal) => Effect.succeed(name === "spent_today" && principal === "alice" ? 60 : 0)))
          })
        )
      )
    )
  )
})
