import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { wkIn } from "../support/WkProcess.js"
import { eventually } from "../support/Stream.js"

// `wk events tail` prints every call's events from the stream, filtered by call, tool and type.
let nats: TestNats
let kernel: InProcessKernel
let toolConn: NatsConnection
let agentConn: NatsConnection
let alice: WitnessClient
let bank: DemoBank
const ids: Record<string, string> = {}

const elsewhere = mkdtempSync(join(tmpdir(), "wk-cwd-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
const wk = wkIn(() => nats.servers, elsewhere, configDir)
const lines = (stdout: string) => stdout.trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { seq: number; held_id: string; tool: string | null; event: { type: string } })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  agentConn = await connectAs(nats.servers, "agent")
  bank = new DemoBank().serve(toolConn)
  alice = clientFor(agentConn, "agent:alice")
  const allowed = (await alice.propose({ session_id: "s-tail", turn_id: "t1", call_id: "small", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 50 } })) as { held_id: string }
  const held = (await alice.propose({ session_id: "s-tail", turn_id: "t1", call_id: "big", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 5000 } })) as { held_id: string }
  const ungranted = (await alice.propose({ session_id: "s-tail", turn_id: "t1", call_id: "other", tool: "wire_transfer", args: {} })) as { held_id: string }
  ids["allowed"] = allowed.held_id
  ids["held"] = held.held_id
  ids["ungranted"] = ungranted.held_id
}, 120_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all([toolConn, agentConn].map((c) => c?.close()))
  await nats?.dispose()
  rmSync(elsewhere, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("wk events tail", () => {
  it("--all replays every call's events in stream order; --tool and --type filter them", async () => {
    const every = await wk("events", "tail", "--all", "--json", "--timeout-ms", "3000")
    expect(every.code, every.stderr).toBe(0)
    expect(every.stderr).toContain("following")
    const all = lines(every.stdout)
    expect(new Set(all.map((l) => l.held_id))).toEqual(new Set(Object.values(ids)))
    expect(all.map((l) => l.seq)).toEqual([...all.map((l) => l.seq)].sort((a, b) => a - b))
    expect(all.filter((l) => l.held_id === ids["allowed"]).map((l) => l.event.type)).toContain("effect.recorded")

    const transfers = lines((await wk("events", "tail", "--all", "--json", "--tool", "money_transfer", "--type", "call.held", "--timeout-ms", "3000")).stdout)
    expect(transfers.map((l) => [l.held_id, l.tool, l.event.type])).toEqual([[ids["held"], "money_transfer", "call.held"]])
  })

  it("follows new events live, from the next one on, and --held keeps to one call", async () => {
    const env: Record<string, string | undefined> = { ...process.env, NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: configDir }
    delete env["WK_CONTEXT"]
    const child = spawn(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), "events", "tail", "--json", "--held", ids["held"]!, "--type", "call.cancelled", "--limit", "1", "--timeout-ms", "60000"], { cwd: elsewhere, env })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    let exitCode: number | null | undefined
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve((exitCode = code))))
    // The tail starts at the next new event: cancel the held call once the tail says it follows.
    await eventually(async () => {
      if (exitCode !== undefined) throw new Error(`wk events tail exited ${exitCode}: ${stderr}`)
      return stderr.includes("following") ? true : undefined
    }, 60_000)
    expect(await alice.cancel(ids["held"]!)).toMatchObject({ status: 200 })
    expect(await exited, stderr).toBe(0)
    expect(lines(stdout).map((l) => [l.held_id, l.event.type])).toEqual([[ids["held"], "call.cancelled"]])
  })
})
