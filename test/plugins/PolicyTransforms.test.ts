// The transform plugins, compiled wasm through the pipeline: path-canon, field-redact, delete-preview.
import { posix } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import fc from "fast-check"
import { pinOf } from "./support.js"
import { baseAllow, pipelineRuntime, resultOf, stageOf } from "./policySupport.js"

const rt = pipelineRuntime()
afterAll(() => rt.dispose())

const Ws = "/ws/project"
const pathCanon = pinOf("path-canon", { config: { workspace: Ws, tools: { fs_read: { fields: ["path"] }, fs_write: { fields: ["path"], allow_outside: true } } } })

describe("path-canon", () => {
  it("resolves .. and duplicate slashes; the executed call carries the canonical path, marked canonicalize", async () => {
    const r = await rt.adjudicate([pathCanon, baseAllow()], "fs_read", { path: "docs/../x//y", limit: 3 })
    expect(r.verdict).toBe("ALLOW")
    expect(r.executed).toEqual({ tool: "fs_read", args: { path: `${Ws}/x/y`, limit: 3 } })
    const first = r.decisions.find((d) => stageOf(d) === "transform")!
    expect(resultOf(first)).toMatchObject({ action: "replace", kind: "canonicalize", reason: "canonical path for path" })
    // The canonical call is transformed again from the start, and kept.
    expect(r.decisions.filter((d) => stageOf(d) === "transform").map((d) => (resultOf(d) as { action: string }).action)).toEqual(["replace", "keep"])
  })

  it("keeps a path that is already canonical", async () => {
    const r = await rt.adjudicate([pathCanon, baseAllow()], "fs_read", { path: `${Ws}/a/b.txt` })
    expect(r.executed.args).toEqual({ path: `${Ws}/a/b.txt` })
    expect(r.decisions.filter((d) => stageOf(d) === "transform").map((d) => (resultOf(d) as { action: string }).action)).toEqual(["keep"])
  })

  it("rejects a NUL byte, an empty path, a non-string path and a path outside the workspace, naming the field", async () => {
    const cases: Array<[unknown, RegExp]> = [
      ["a\u0000.txt", /argument 'path': path contains a NUL byte/],
      ["", /argument 'path': path is empty/],
      [42, /argument 'path' must be a path string/],
      ["../x//y", /argument 'path' resolves to \/ws\/x\/y, outside the workspace \/ws\/project/],
      ["/etc/passwd", /outside the workspace/],
      ["a/../../../../etc", /resolves to \/etc, outside/]
    ]
    for (const [path, why] of cases) {
      const r = await rt.adjudicate([pathCanon, baseAllow()], "fs_read", { path } as never)
      expect(r.verdict, JSON.stringify(path)).toBe("DENY")
      expect(r.reasons).toHaveLength(1)
      expect(r.reasons[0]!.by).toBe("plugin:path-canon@1.0.0")
      expect(r.reasons[0]!.reason).toMatch(why)
      // Nothing half-applied: no adjudicator ran on a rejected call.
      expect(r.decisions.filter((d) => stageOf(d) === "adjudicate")).toEqual([])
    }
  })

  it("with allow_outside, an outside path is canonicalized and left to the adjudicators", async () => {
    const r = await rt.adjudicate([pathCanon, baseAllow()], "fs_write", { path: "../../etc//hosts" })
    expect(r.executed.args).toEqual({ path: "/etc/hosts" })
  })

  it("property: the executed path is posix.normalize of the workspace join, and DENY exactly when it leaves the workspace", async () => {
    const segment = fc.constantFrom("a", "b", "..", ".", "", "src", "x.y")
    await fc.assert(
      fc.asyncProperty(fc.array(segment, { minLength: 1, maxLength: 8 }), fc.boolean(), async (parts, absolute) => {
        const path = (absolute ? "/" : "") + parts.join("/")
        fc.pre(path.length > 0)
        const expected = posix.normalize(posix.join(path.startsWith("/") ? "/" : Ws, path)).replace(/(.)\/$/, "$1")
        const inside = expected === Ws || expected.startsWith(Ws + "/")
        const r = await rt.adjudicate([pathCanon, baseAllow()], "fs_read", { path })
        if (inside) {
          expect(r.verdict).toBe("ALLOW")
          expect(r.executed.args["path"]).toBe(expected)
        } else {
          expect(r.verdict).toBe("DENY")
          expect(r.reasons[0]!.reason).toContain(`resolves to ${expected}, outside`)
        }
      }),
      { numRuns: 120 }
    )
  })
})

const redact = pinOf("field-redact", { config: { fields: ["password", "ssn"], tools: ["crm_*"] } })

describe("field-redact", () => {
  it("removes forbidden fields at any depth, case-insensitively, and says which", async () => {
    const r = await rt.adjudicate([redact, baseAllow()], "crm_update", { name: "Ann", Password: "hunter2", profile: { ssn: "078-05-1120", city: "Oslo" }, list: [{ ssn: "x", k: 1 }] })
    expect(r.verdict).toBe("ALLOW")
    expect(r.executed.args).toEqual({ name: "Ann", profile: { city: "Oslo" }, list: [{ k: 1 }] })
    expect(JSON.stringify(r.executed)).not.toContain("hunter2")
    expect(resultOf(r.decisions[0]!)).toMatchObject({ action: "replace", kind: "rewrite", reason: "removed forbidden fields: Password, ssn" })
  })

  it("keeps calls without forbidden fields, and tools it does not cover", async () => {
    const clean = await rt.adjudicate([redact, baseAllow()], "crm_update", { name: "Ann" })
    expect(clean.executed.args).toEqual({ name: "Ann" })
    const other = await rt.adjudicate([redact, baseAllow()], "notes_write", { password: "p" })
    expect(other.executed.args).toEqual({ password: "p" })
  })
})

const preview = pinOf("delete-preview", { config: { contract: { rule: { class: "human" } } } })

describe("delete-preview", () => {
  it("a delete_* call without dry_run becomes its dry run and is allowed", async () => {
    const r = await rt.adjudicate([preview, baseAllow()], "delete_file", { path: "/ws/a" })
    expect(r.verdict).toBe("ALLOW")
    expect(r.executed).toEqual({ tool: "delete_file", args: { path: "/ws/a", dry_run: true } })
  })

  it("dry_run: false is a real delete: it needs a witness; a non-boolean flag is denied", async () => {
    const real = await rt.adjudicate([preview, baseAllow()], "delete_file", { path: "/ws/a", dry_run: false })
    expect(real.verdict).toBe("REQUIRE_WITNESS")
    expect(real.executed.args).toEqual({ path: "/ws/a", dry_run: false })
    expect(real.contract).toEqual({ rule: { class: "human" } })
    expect(real.reasons).toEqual([{ by: "plugin:delete-preview@1.0.0", reason: "delete_file with dry_run: false deletes for real" }])
    const odd = await rt.adjudicate([preview, baseAllow()], "delete_file", { path: "/ws/a", dry_run: "no" })
    expect(odd).toMatchObject({ verdict: "DENY", reasons: [{ reason: "argument 'dry_run' must be true or false" }] })
  })

  it("other tools are untouched", async () => {
    const r = await rt.adjudicate([preview, baseAllow()], "fs_read", { path: "/ws/a" })
    expect(r).toMatchObject({ verdict: "ALLOW", executed: { tool: "fs_read", args: { path: "/ws/a" } } })
  })
})
