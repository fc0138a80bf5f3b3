import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer } from "node:net"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { startKernelProcess, profileDir, type KernelProcess } from "../support/KernelProcess.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { eventually } from "../support/Stream.js"
import { ReadinessDeadlineMs } from "../../runtime/observability/KernelHttp.js"

// A kernel process started with a metrics port and host, as an operator runs it: its health and
// readiness endpoints and its Prometheus metrics, scraped after real calls; readiness answers a
// probe with a 1 s timeout (Kubernetes' default) with 503, naming NATS, while the server hangs
// (SIGSTOP) and once it is gone.
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer()
    s.listen(0, "127.0.0.1", () => {
      const a = s.address()
      const port = typeof a === "object" && a !== null ? a.port : 0
      s.close(() => resolve(port))
    })
  })

let nats: TestNats
let kernel: KernelProcess
let conns: Array<NatsConnection> = []
let base = ""
/** A GET as a probe makes it: given up after 1 s (Kubernetes' default `timeoutSeconds`). */
const get = async (path: string, at = base) => {
  const r = await fetch(`${at}${path}`, { signal: AbortSignal.timeout(1000) })
  return { status: r.status, type: r.headers.get("content-type") ?? "", text: await r.text() }
}
/** A sample's value from Prometheus text (0 when absent). */
const sample = (text: string, name: string, labels = ""): number => {
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels === "" ? "" : `{${labels}`}`) && !l.startsWith("#"))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}

beforeAll(async () => {
  nats = await startTestNats()
  const port = await freePort()
  // Another loopback address than the default one: the endpoints are where the option says only.
  base = `http://127.0.0.2:${port}`
  kernel = await startKernelProcess(nats.servers, profileDir([testProfile()]), { WK_METRICS_PORT: String(port), WK_METRICS_HOST: "127.0.0.2" })
  const [tool, agent, witness] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness")])
  conns = [tool, agent, witness]
  new DemoBank().serve(tool)
}, 120_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("the kernel's operator endpoints", () => {
  it("says where they are when it starts, and listens on the address it was given only", async () => {
    expect(kernel.output()).toContain(`Ops:   ${base}/metrics, /healthz, /readyz`)
    expect((await get("/healthz")).status).toBe(200)
    await expect(get("/healthz", base.replace("127.0.0.2", "127.0.0.1"))).rejects.toThrow()
  })

  it("/healthz answers; /readyz is ready with every check ok", async () => {
    expect(await get("/healthz")).toMatchObject({ status: 200 })
    const ready = await get("/readyz")
    expect(ready.status).toBe(200)
    expect(JSON.parse(ready.text)).toEqual({ status: "ready", checks: { nats: "ok", streams: "ok", policy: "ok", consumer: "ok" } })
    expect((await get("/nope")).status).toBe(404)
  })

  it("/metrics counts calls by verdict and outcome, times requests, counts open calls by state, settled wakes and release times, and reports the policy epoch and the build", async () => {
    const before = (await get("/metrics")).text
    const alice = clientFor(conns[1]!, "agent:alice")
    for (let i = 0; i < 3; i++) {
      const r = (await alice.propose({ session_id: "s-ops", turn_id: "t1", call_id: `c${i}`, tool: "money_transfer", args: { from: "alice", to: "bob", amount: 10 + i } } as never)) as { status: number }
      expect(r.status).toBe(200)
    }
    const held = (await alice.propose({ session_id: "s-ops", turn_id: "t1", call_id: "big", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 5000 } } as never)) as { status: number }
    expect(held.status).toBe(202)
    const heldId = (held as unknown as { held_id: string }).held_id
    const m = await get("/metrics")
    expect(m.status).toBe(200)
    expect(m.type).toMatch(/^text\/plain/)
    const delta = (name: string, labels = "") => sample(m.text, name, labels) - sample(before, name, labels)
    expect(delta("wk_calls_adjudicated_total", 'verdict="ALLOW"')).toBe(3)
    expect(delta("wk_calls_adjudicated_total", 'verdict="REQUIRE_WITNESS"')).toBe(1)
    expect(delta("wk_calls_ended_total", 'outcome="completed"')).toBe(3)
    expect(delta("wk_request_seconds_count", 'op="propose"')).toBe(4)
    expect(delta("wk_events_committed_total", 'type="effect.recorded"')).toBe(3)
    expect(sample(m.text, "wk_policy_epoch")).toBe(1)
    expect(m.text).toMatch(/^wk_controller_consumer_pending \d+$/m)
    // Standard process and Node.js names (stock dashboards), and the build.
    expect(m.text).toMatch(/^process_cpu_seconds_total /m)
    expect(m.text).toMatch(/^nodejs_eventloop_lag_seconds /m)
    expect(m.text).not.toMatch(/^wk_process_|^wk_nodejs_/m)
    const version = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version
    expect(m.text).toContain(`wk_build_info{version="${version}",nodejs_version="${process.version}"} 1`)
    // A blocking proposal may wait minutes: the request buckets go on to 10 minutes.
    expect(m.text).toMatch(/^wk_request_seconds_bucket\{le="600",op="propose"\} \d+$/m)
    // Open calls by state, read when scraped: the held call is open and waits for its witness.
    expect(sample(m.text, "wk_held_calls_open", 'state="open/unsatisfied"')).toBeGreaterThanOrEqual(1)
    // Every ALLOW call's wake settles: counted as settled.
    const delta2 = (t: string, name: string, labels = "") => sample(t, name, labels) - sample(before, name, labels)
    await eventually(async () => delta2((await get("/metrics")).text, "wk_reconcile_outcomes_total", 'outcome="settled"') >= 3, 10_000)

    // The approval releases the call: the time from approval to delivery is observed once, and it is no longer open.
    const carol = clientFor(conns[2]!, "user:carol")
    expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
    const openBefore = sample(m.text, "wk_held_calls_open", 'state="open/unsatisfied"')
    const released = await eventually(async () => {
      const t = (await get("/metrics")).text
      return delta2(t, "wk_release_seconds_count") >= 1 && sample(t, "wk_held_calls_open", 'state="open/unsatisfied"') < openBefore ? t : undefined
    }, 20_000)
    expect(delta2(released, "wk_release_seconds_count")).toBe(1)
    expect(delta2(released, "wk_release_seconds_bucket", 'le="+Inf"')).toBe(1)
    expect(sample(released, "wk_held_calls_open", 'state="open/unsatisfied"')).toBe(openBefore - 1)
  })

  it("logs JSON lines on stderr naming its kernel and run; quiet by default, a line per committed event at debug", async () => {
    const lines = (out: string) => out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>)
    const ready = lines(kernel.output()).find((l) => l["msg"] === "kernel ready")
    expect(ready).toMatchObject({ level: "info", kernel: expect.stringMatching(/^kernel-/), run: expect.stringMatching(/^[0-9a-f]{8}$/) })
    expect(lines(kernel.output()).some((l) => l["msg"] === "committed")).toBe(false)
    const verbose = await startKernelProcess(nats.servers, profileDir([testProfile()]), { WK_LOG_LEVEL: "debug" })
    try {
      const alice = clientFor(conns[1]!, "agent:alice")
      // The kernels share the requests (a queue group): of a dozen calls, the verbose one commits some.
      for (let i = 0; i < 12; i++) {
        const r = (await alice.propose({ session_id: "s-logs", turn_id: "t1", call_id: `c-log-${i}`, tool: "money_transfer", args: { from: "alice", to: "bob", amount: 1 + i } } as never)) as { status: number }
        expect(r.status).toBe(200)
      }
      await eventually(async () => lines(verbose.output()).some((l) => l["msg"] === "committed"), 20_000)
      const committed = lines(verbose.output()).filter((l) => l["msg"] === "committed")
      expect(committed[0]).toMatchObject({ level: "debug", held_id: expect.stringMatching(/^h_/), event: expect.any(String), seq: expect.any(Number), kernel: expect.stringMatching(/^kernel-/) })
    } finally {
      await verbose.stop()
    }
  }, 120_000)

  it("answers wk.v1.admin.status with its version and its last recovery sweep", async () => {
    const replies: Array<Record<string, unknown>> = []
    const admin = await connectAs(nats.servers, "kernel")
    conns.push(admin)
    for await (const m of await admin.requestMany("wk.v1.admin.status", new Uint8Array(0), { maxWait: 1000 })) replies.push(m.json<Record<string, unknown>>())
    expect(replies.length).toBeGreaterThanOrEqual(1)
    const version = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version
    for (const r of replies) {
      expect(r).toMatchObject({ version, owner: expect.stringMatching(/^kernel-/) })
      expect(r["last_recovery_at"] === null || typeof r["last_recovery_at"] === "string").toBe(true)
    }
  })

  it("/readyz answers a probe 503 naming NATS while the server hangs (SIGSTOP), and ready once it runs again", async () => {
    process.kill(nats.pid, "SIGSTOP")
    try {
      const r = await get("/readyz")
      expect(r.status).toBe(503)
      const body = JSON.parse(r.text) as { status: string; checks: Record<string, string> }
      expect(body.status).toBe("not ready")
      expect(body.checks["nats"]).toBe(`no answer within ${ReadinessDeadlineMs} ms`)
      expect((await get("/healthz")).status).toBe(200)
    } finally {
      process.kill(nats.pid, "SIGCONT")
    }
    await eventually(async () => (await get("/readyz").catch(() => ({ status: 0 }))).status === 200, 20_000)
  })

  it("/readyz answers the first probe after the server is gone 503 naming NATS, and /healthz still answers", async () => {
    await nats.stop()
    const r = JSON.parse((await get("/readyz")).text) as { status: string; checks: Record<string, string> }
    expect(r.status).toBe("not ready")
    expect(["not connected to NATS", `no answer within ${ReadinessDeadlineMs} ms`]).toContain(r.checks["nats"])
    expect((await get("/healthz")).status).toBe(200)
  })
})
