import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { Objm } from "@nats-io/obj"
import { Effect, Layer } from "effect"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { layerHostEnvMemory } from "../../runtime/plugins/HostEnv.js"
import { layerPluginAdjudicator, layerPluginAdmission } from "../../runtime/plugins/Pipeline.js"
import { layerPluginHost } from "../../runtime/plugins/PluginHost.js"
import { layerPluginSourceObjectStore, PluginBucket, publishPlugin } from "../../runtime/ledger/PluginStore.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { artifact, pinOf } from "../plugins/support.js"
import { checkOf, failedChecks, replayAs } from "./support.js"

// A kernel whose policy is WASM plugins loaded from the object store; the auditor re-runs every
// recorded decision from the pinned bytes, and notices when the stored bytes are swapped.
let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
const spendLimit = pinOf("spend-limit", { config: { rules: { money_transfer: { amount_field: "amount", witness_above: 1000 } } } })
const secretScan = pinOf("secret-scan")
const profile = testProfile({ plugins: [spendLimit, secretScan] })

beforeAll(async () => {
  nats = await startTestNats()
  kernelConn = await connectAs(nats.servers, "kernel")
  for (const name of ["spend-limit", "secret-scan"]) {
    const a = artifact(name)
    await Effect.runPromise(publishPlugin(kernelConn, a.bytes, a.manifest))
  }
  const host = Layer.merge(layerPluginHost.pipe(Layer.provide(layerPluginSourceObjectStore(kernelConn))), layerHostEnvMemory())
  kernel = await startKernel(nats.servers, [profile], {
    adjudicator: layerPluginAdjudicator.pipe(Layer.provide(host)),
    admission: layerPluginAdmission.pipe(Layer.provide(host))
  })
  const [tool, agent, witness] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness")])
  conns = [tool, agent, witness, kernelConn]
  new DemoBank().serve(tool)
  const alice = clientFor(agent, "agent:alice")
  const small = await alice.propose({ session_id: "s-plug", turn_id: "t1", call_id: "p1", tool: "money_transfer", args: { from: "a", to: "b", amount: 50 } })
  expect(small.status).toBe(200)
  const big = (await alice.propose({ session_id: "s-plug", turn_id: "t1", call_id: "p2", tool: "money_transfer", args: { from: "c", to: "d", amount: 5000 } })) as { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
  expect(big.status).toBe(202)
  await clientFor(witness, "user:carol").attest({ held_id: big.held_id, generation: big.generation, call_digest: big.call_digest, contract_digest: big.witness_request.contract_digest, class: "human", decision: "approve" })
  await eventually(async () => (await alice.get(big.held_id)).held?.["continuation_delivery"] !== "none")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("plugin-rerun", () => {
  it("re-runs every recorded adjudication and admission decision from the pinned wasm (auditor credentials)", async () => {
    const r = await replayAs(nats.servers, "auditor", { rerunPlugins: true })
    expect(failedChecks(r)).toEqual([])
    const c = checkOf(r, "plugin-rerun")
    // 2 calls x (spend-limit adjudication + secret-scan admission)
    expect(c).toMatchObject({ status: "passed", checked: 4, unverified: [] })
  })

  it("a pinned wasm swapped for other bytes in the object store -> plugin-pins by default, and plugin-rerun", async () => {
    const swapped = `${PluginBucket}_swapped`
    const os = await new Objm(kernelConn).create(swapped)
    await os.putBlob({ name: `wasm/${spendLimit.sha256}` }, artifact("secret-scan").bytes)
    await os.putBlob({ name: `wasm/${secretScan.sha256}` }, artifact("secret-scan").bytes)
    // Without re-running anything (--no-rerun), the stored bytes are hashed against the pins.
    const cheap = await replayAs(nats.servers, "kernel", { pluginBucket: swapped, rerunPlugins: false })
    expect(failedChecks(cheap)).toEqual(["plugin-pins"])
    // spend-limit's digest holds secret-scan's bytes; secret-scan's holds its own.
    expect(checkOf(cheap, "plugin-pins").violations.map((v) => v.message)).toEqual([expect.stringMatching(new RegExp(`wasm/${spendLimit.sha256} holds other bytes`))])
    const r = await replayAs(nats.servers, "kernel", { rerunPlugins: true, pluginBucket: swapped })
    expect(failedChecks(r)).toEqual(["plugin-pins", "plugin-rerun"])
    const v = checkOf(r, "plugin-rerun").violations
    expect(v).toHaveLength(2)
    expect(v[0]!.message).toContain("holds other bytes")
  })

  it("a recorded verdict changed in a copy of the log -> plugin-rerun (the wasm gives the original)", async () => {
    const { readAll, copyStream } = await import("./support.js")
    const stream = await copyStream(kernelConn, await readAll(kernelConn), (ms) =>
      ms.map((m) => {
        if (m.body["type"] !== "call.adjudicated") return m
        const decisions = (m.body["decisions"] as Array<{ output: { result?: { verdict?: string } } }>).map((d) =>
          d.output.result?.verdict === "ALLOW" ? { ...d, output: { ...d.output, result: { ...d.output.result, verdict: "DENY" } } } : d
        )
        return { ...m, body: { ...m.body, decisions } }
      })
    )
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, rerunPlugins: true })
    expect(failedChecks(r)).toEqual(["plugin-rerun"])
    expect(checkOf(r, "plugin-rerun").violations[0]!.message).toContain("re-run gave")
  })
})
