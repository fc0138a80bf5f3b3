import { describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { repoRoot } from "../../runtime/cli/Paths.js"

// `wk profile explain` as a child process over the example profiles in profiles/ (no NATS needed).
const run = promisify(execFile)
const wk = async (...args: Array<string>) => {
  try {
    const r = await run("npx", ["tsx", "--disable-warning=ExperimentalWarning", "runtime/cli/main.ts", ...args], { cwd: repoRoot, timeout: 60_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}

describe("wk profile explain", () => {
  it("shows the merged grant, rule, preferences and plugins for a call and which layer set each (--json)", async () => {
    const r = await wk("profile", "explain", "money_transfer", "--principal", "agent:alice", "--profiles", join(repoRoot, "profiles"), "--json")
    expect(r.code).toBe(0)
    const e = JSON.parse(r.stdout) as Record<string, any>
    expect(e.grant).toEqual({ granted: true, set_by: ["organization 'acme-org'", "project 'acme-payments'"] })
    expect(e.rule.witness_above).toBe(500)
    expect(e.rule_set_by).toEqual(["project 'acme-payments'"])
    expect(e.preferences.witness_route).toEqual({ principal: "user:carol" })
    expect(e.preferences_set_by).toContain("user 'carol-user'")
    const adjudicate = e.stages.find((s: any) => s.stage === "adjudicate")
    expect(adjudicate.plugins[0]).toMatchObject({ name: "spend-limit", set_by: "organization 'acme-org'" })
    expect(adjudicate.plugins[0].rule.contract.veto).toEqual(["compliance"])
    expect(e.powers).toContain("'money_transfer' is granted")
  }, 60_000)

  it("lists a principal's powers as the kernel judges a policy change: the compliance officer vetoes and edits nothing", async () => {
    const r = await wk("profile", "explain", "money_transfer", "--principal", "compliance:zoe", "--profiles", join(repoRoot, "profiles"), "--json")
    expect(r.code).toBe(0)
    const e = JSON.parse(r.stdout) as { powers: ReadonlyArray<string> }
    expect(e.powers).toContain("vetoes the calls a plugin holds with a 'compliance' veto")
    expect(e.powers.some((p) => p.startsWith("edits"))).toBe(false)
  }, 60_000)

  it("refuses a widening layer with one line naming the layer, the profile and the field", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wk-explain-"))
    writeFileSync(join(dir, "a.json"), JSON.stringify({ name: "acme-org", layer: "organization", grants: { "agent:alice": ["money_transfer"] } }))
    writeFileSync(join(dir, "b.json"), JSON.stringify({ name: "carol-prefs", layer: "user", grants: { "agent:alice": ["wire_transfer"] } }))
    const r = await wk("profile", "explain", "wire_transfer", "--principal", "agent:alice", "--profiles", dir)
    expect(r.code).not.toBe(0)
    expect(r.stderr.trim()).toBe("wk: user layer 'carol-prefs' widens grants.agent:alice: 'wire_transfer' is not granted by organization 'acme-org'")
  }, 60_000)
})
