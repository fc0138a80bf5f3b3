import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startGatewayHarness, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"

// docs/python/wk_gateway_client.py, a client written from docs/protocol.md with Python's standard
// library and `cryptography`, against a real gateway and kernel: it checks itself against the
// signing vectors, proposes, and a witness it signs for releases a held call. Skipped, with the
// reason, where python3 or `cryptography` is missing.
const script = join(repoRoot, "docs", "python", "wk_gateway_client.py")
const pythonReady = spawnSync("python3", ["-c", "import cryptography"], { encoding: "utf8" }).status === 0
if (!pythonReady) console.warn("test/integrations/PythonClient.test.ts: skipped: python3 with `cryptography` is not installed (apt-get install -y python3-cryptography)")

const seedOf = (principal: string) => createHash("sha256").update(`witness-kernel dev key v1:${principal}`).digest().toString("base64")
/** Runs the client without blocking the event loop (the gateway and kernel run in this process). */
const py = (...args: Array<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("python3", [script, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => void (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => void (stderr += d.toString()))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })
const reply = (stdout: string) => JSON.parse(stdout) as { http_status: number; reply: Record<string, any> }

describe.skipIf(!pythonReady)("the Python gateway client in docs/python", () => {
  let h: GatewayHarness
  beforeAll(async () => {
    h = await startGatewayHarness()
  }, 60_000)
  afterAll(async () => {
    await h?.stop()
  })

  it("checks itself against docs/signing-vectors.json", async () => {
    const out = (await py("check-vectors", join(repoRoot, "docs", "signing-vectors.json"))).stdout
    expect(out).toMatch(/^ok {3}a proposal$/m)
    expect(out).toMatch(/^ok {3}an attestation$/m)
    expect(out).not.toMatch(/FAIL/)
  })

  it("proposes a transfer that completes, and one that is held and released by a witness it signs for: one effect each", async () => {
    const before = h.bank.effects
    const small = await py("propose", h.url, "agent:alice", seedOf("agent:alice"), "money_transfer", JSON.stringify({ from: "alice", to: "bob", amount: 250 }))
    expect(small.code).toBe(0)
    expect(reply(small.stdout)).toMatchObject({ http_status: 200, reply: { outcome: "completed" } })
    expect(h.bank.effects).toBe(before + 1)

    const big = await py("propose", h.url, "agent:alice", seedOf("agent:alice"), "money_transfer", JSON.stringify({ from: "alice", to: "bob", amount: 2500 }))
    const held = reply(big.stdout)
    expect(held.http_status).toBe(202)
    const r = held.reply
    const approve = await py("attest", h.url, "user:carol", seedOf("user:carol"), r["held_id"], String(r["generation"]), r["call_digest"], r["witness_request"]["contract_digest"], "human")
    expect(reply(approve.stdout).http_status).toBe(202)
    await eventually(async () => h.bank.effects === before + 2)
  }, 60_000)

  it("a signature by a key that is not the principal's is refused (401), and nothing runs", async () => {
    const before = h.bank.effects
    const forged = await py("propose", h.url, "agent:alice", seedOf("agent:mallory"), "money_transfer", JSON.stringify({ from: "alice", to: "mallory", amount: 10 }))
    expect(forged.code).toBe(1)
    expect(reply(forged.stdout).http_status).toBe(401)
    expect(h.bank.effects).toBe(before)
  })
})
