import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"

// The bin runs the bundle only while no source is newer (runtime/cli/wk.mjs): in a checkout being
// edited it runs the sources. It learns the sources from the list the build wrote
// (build/cli/sources.json) instead of walking the folders. A copy of the bin in a folder of its own,
// with a bundle that says "bundle" and sources that say "sources", shows which one ran.
let root: string
const past = new Date(Date.now() - 3_600_000)
const bundleTime = new Date(Date.now() - 1_800_000)

const ran = () => execFileSync(process.execPath, [join(root, "runtime", "cli", "wk.mjs"), "anything"], { cwd: root, encoding: "utf8", env: { ...process.env, WK_CLI_SOURCES: "" } }).trim()
const age = (path: string, when: Date) => utimesSync(join(root, path), when, when)

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "wk-fresh-"))
  for (const d of [".git", "runtime/cli", "runtime/policy", "plugin-sdk/tools", "build/cli"]) mkdirSync(join(root, d), { recursive: true })
  symlinkSync(join(repoRoot, "node_modules"), join(root, "node_modules"))
  writeFileSync(join(root, "package.json"), JSON.stringify({ name: "fresh", version: "0.0.0", type: "module" }))
  copyFileSync(join(repoRoot, "runtime", "cli", "wk.mjs"), join(root, "runtime", "cli", "wk.mjs"))
  writeFileSync(join(root, "runtime", "cli", "main.ts"), 'console.log("sources")\n')
  writeFileSync(join(root, "runtime", "policy", "Rule.ts"), "export const rule = 1\n")
  writeFileSync(join(root, "build", "cli", "wk.cjs"), 'console.log("bundle")\n')
  writeFileSync(join(root, "build", "cli", "sources.json"), JSON.stringify({ dirs: ["runtime", "runtime/cli", "runtime/policy", "plugin-sdk/tools"], files: ["runtime/cli/wk.mjs", "runtime/cli/main.ts", "runtime/policy/Rule.ts"] }))
  for (const p of ["runtime/cli/wk.mjs", "runtime/cli/main.ts", "runtime/policy/Rule.ts", "runtime/cli", "runtime/policy", "runtime", "plugin-sdk/tools"]) age(p, past)
  age("build/cli/wk.cjs", bundleTime)
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe("the bin runs the bundle only while it is as new as every listed source", () => {
  it("runs the bundle when nothing is newer; the sources once a file is edited", () => {
    expect(ran()).toBe("bundle")
    age("runtime/policy/Rule.ts", new Date())
    expect(ran()).toBe("sources")
    age("runtime/policy/Rule.ts", past)
    expect(ran()).toBe("bundle")
  })

  it("runs the sources when a file is added to a listed folder, or a listed file is gone", () => {
    writeFileSync(join(root, "runtime", "policy", "New.ts"), "export const n = 2\n")
    expect(ran()).toBe("sources")
    unlinkSync(join(root, "runtime", "policy", "New.ts"))
    age("runtime/policy", past)
    expect(ran()).toBe("bundle")
    unlinkSync(join(root, "runtime", "policy", "Rule.ts"))
    age("runtime/policy", past)
    expect(ran()).toBe("sources")
  })
})
