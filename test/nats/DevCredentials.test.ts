import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { join } from "node:path"
import nacl from "tweetnacl"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { devCredentialsIn, devSignerPublicKey } from "../../runtime/cli/DevCredentials.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { profileDir } from "../support/KernelProcess.js"
import { testProfile } from "../support/Principals.js"

// Development credentials are loud: a kernel started without --dev refuses the dev principal
// keys anyone can derive, the committed dev plugin signer and the `*-dev` NATS passwords.
let nats: TestNats

beforeAll(async () => {
  nats = await startTestNats()
})

afterAll(async () => {
  await nats?.dispose()
})

/** Runs `wk kernel` until it exits, or until it is ready (then stops it), and returns its exit code and output. */
const runKernel = (args: ReadonlyArray<string>, profiles: string) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(repoRoot, "runtime/cli/main.ts"), "kernel", ...args, "--profiles", profiles], {
      cwd: repoRoot,
      env: { ...process.env, NATS_URL: `nats://kernel:kernel-dev@${nats.servers}` },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    const onData = (d: Buffer) => {
      out += d.toString()
      if (out.includes("Witness Kernel ready")) child.kill("SIGINT")
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    const timer = setTimeout(() => child.kill("SIGKILL"), 100_000)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })

describe("development credentials", () => {
  it("a production start (no --dev) with the example profiles and kernel-dev is refused, naming each dev credential on its first line onward", async () => {
    const r = await runKernel([], join(repoRoot, "profiles"))
    expect(r.code).toBe(1)
    const lines = r.out.trim().split("\n")
    expect(lines[0]).toMatch(/^wk: refusing to start: development credentials/)
    expect(r.out).toContain("registers the dev key of 'agent:alice'")
    expect(r.out).toContain("signed by the committed dev signer")
    expect(r.out).toContain("NATS user 'kernel' uses a development password")
    expect(r.out).not.toContain("Witness Kernel ready")
  }, 120_000)

  it("with --dev the same kernel starts, and its first line says it runs in development mode", async () => {
    const r = await runKernel(["--dev"], profileDir([testProfile()]))
    expect(r.out.split("\n")[0]).toMatch(/^DEVELOPMENT MODE \(--dev\)/)
    expect(r.out).toContain("Witness Kernel ready")
  }, 120_000)

  it("finds nothing in a profile with keys of its own, pins signed by another signer, and a real password", () => {
    const own = Buffer.from(nacl.sign.keyPair().publicKey).toString("base64")
    const profile: Profile = { ...testProfile(), principals: { "agent:alice": { keys: [own], classes: ["agent"] } } }
    expect(devCredentialsIn([profile], [{ user: "kernel", pass: "a-long-random-secret" }])).toEqual([])
    expect(devSignerPublicKey()).toMatch(/^[A-Za-z0-9+/]{43}=$/)
  })
})
