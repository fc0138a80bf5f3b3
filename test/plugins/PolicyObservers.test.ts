// The observer plugins, compiled wasm through the pipeline: audit-sink and notifier publish
// through the granted `publish` host function; no observer changes a decision.
import { Effect, Exit } from "effect"
import { afterAll, beforeEach, describe, expect, it } from "vitest"
import { PluginHost } from "../../runtime/plugins/PluginHost.js"
import { Capabilities } from "../../runtime/schema/PluginManifest.js"
import { Schema } from "effect"
import { pinOf } from "./support.js"
import { baseAllow, faultOf, pipelineRuntime, stageOf } from "./policySupport.js"

const published: Array<{ subject: string; data: string }> = []
const rt = pipelineRuntime({ published })
afterAll(() => rt.dispose())
beforeEach(() => void published.splice(0))

const limit = pinOf("transfer-limit", { config: { witness_above: 1000, deny_above: 100_000 } })
const notifier = pinOf("notifier")
const audit = pinOf("audit-sink")
const settle = () => new Promise((r) => setTimeout(r, 20))

describe("notifier", () => {
  it("publishes held and denied calls and quarantined results to their channels; not allowed calls", async () => {
    await rt.adjudicate([limit, notifier], "money_transfer", { amount: 5 })
    await rt.adjudicate([limit, notifier], "money_transfer", { amount: 5000 })
    await rt.adjudicate([limit, notifier], "money_transfer", { amount: 500_000 })
    await rt.admit([pinOf("secret-detect"), notifier], "notes_read", { k: "AKIA" + "IOSFODNN7EXAMPLE" })
    await settle()
    expect(published.map((p) => p.subject)).toEqual(["wk.notify.approvals", "wk.notify.security", "wk.notify.security"])
    const [held, denied, quarantined] = published.map((p) => JSON.parse(p.data))
    expect(held).toEqual({ kind: "held", principal: "alice", tool: "money_transfer", verdict: "REQUIRE_WITNESS", reasons: [{ by: "plugin:transfer-limit@1.0.0", reason: "amount 5000 is over the witness threshold 1000" }], text: "money_transfer by alice is waiting for a witness" })
    expect(denied).toMatchObject({ kind: "denied", verdict: "DENY" })
    expect(quarantined).toMatchObject({ kind: "quarantined", tool: "notes_read", verdict: "QUARANTINE", reasons: [{ by: "plugin:secret-detect@1.0.0" }] })
    expect(JSON.stringify(published)).not.toContain("IOSFODNN7EXAMPLE")
  })

  it("a subject outside the granted prefix is a host fault, recorded, and the verdict is unchanged", async () => {
    const narrow = pinOf("notifier", { capabilities: { host_functions: ["publish"], publish_prefix: "wk.notify.security." } })
    const r = await rt.adjudicate([limit, narrow], "money_transfer", { amount: 5000 })
    expect(r.verdict).toBe("REQUIRE_WITNESS")
    const d = r.decisions.find((x) => stageOf(x) === "observe")!
    expect(faultOf(d)).toBe("host_fault")
    expect(d.host_values).toEqual([{ fn: "wk_publish", arg: { subject: "wk.notify.approvals", data: expect.any(String) }, fault: "subject \"wk.notify.approvals\" is outside the granted prefix 'wk.notify.security.'" }])
    await settle()
    expect(published).toEqual([])
  })
})

describe("audit-sink", () => {
  it("publishes one record per outcome with argument names only", async () => {
    await rt.adjudicate([baseAllow(), audit], "notes_write", { path: "/ws/a", text: "private words" })
    await rt.admit([audit], "notes_write", { ok: true }, { path: "/ws/a", text: "private words" })
    await settle()
    expect(published.map((p) => p.subject)).toEqual(["wk.audit.adjudicated", "wk.audit.admitted"])
    expect(JSON.parse(published[0]!.data)).toEqual({ event: "adjudicated", principal: "alice", tool: "notes_write", verdict: "ALLOW", reasons: [], at: 1_767_000_000_000, arg_names: ["path", "text"] })
    expect(JSON.stringify(published)).not.toContain("private words")
  })

  it("include_args puts the arguments in", async () => {
    await rt.adjudicate([baseAllow(), pinOf("audit-sink", { config: { include_args: true } })], "notes_write", { text: "t" })
    await settle()
    expect(JSON.parse(published[0]!.data).args).toEqual({ text: "t" })
  })
})

describe("observers change no decision", () => {
  it("a trapping observer, a notifier and an audit sink leave verdict, reasons, contract and executed as without them", async () => {
    const cases: Array<[string, Record<string, number>]> = [["money_transfer", { amount: 5 }], ["money_transfer", { amount: 5000 }], ["money_transfer", { amount: 500_000 }]]
    const trap = pinOf("fixtures/trap-every-stage", { stages: ["observe"] })
    for (const [tool, args] of cases) {
      const bare = await rt.adjudicate([limit], tool, args)
      const observed = await rt.adjudicate([limit, trap, notifier, audit], tool, args)
      expect({ ...observed, decisions: undefined }).toEqual({ ...bare, decisions: undefined })
      expect(observed.decisions.filter((d) => stageOf(d) === "observe").map(faultOf)).toEqual([undefined, undefined, "trap"]) // audit-sink, notifier, trap-every-stage
    }
  })
})

describe("publish grants", () => {
  it("a pin granting publish needs a prefix the manifest requests, and egress external", async () => {
    const refused = async (pin: ReturnType<typeof pinOf>) => {
      const exit = await rt.runtime.runPromiseExit(Effect.flatMap(PluginHost, (h) => h.load(pin)))
      return Exit.isFailure(exit) ? String(exit.cause) : "loaded"
    }
    expect(await refused(pinOf("notifier", { capabilities: { host_functions: ["publish"], publish_prefix: "wk.audit." } }))).toMatch(/publish prefix 'wk.audit.', the manifest requests 'wk.notify.'/)
    expect(await refused(pinOf("notifier", { capabilities: { host_functions: ["publish"] } }))).toMatch(/without a publish_prefix/)
    expect(await refused(pinOf("notifier", { egress: "kernel" }))).toMatch(/egress/)
    expect(await refused(pinOf("notifier", { capabilities: { host_functions: [] } }))).toMatch(/wk_publish/)
  })

  it("protocol subjects are never grantable", () => {
    const decode = Schema.decodeUnknownEither(Capabilities)
    expect(decode({ host_functions: ["publish"], publish_prefix: "wk.v1." })._tag).toBe("Left")
    expect(decode({ host_functions: ["publish"], publish_prefix: "wk.v1.events." })._tag).toBe("Left")
    expect(decode({ host_functions: ["publish"], publish_prefix: "wk.>" })._tag).toBe("Left")
    expect(decode({ host_functions: ["publish"], publish_prefix: "wk.notify.ops." })._tag).toBe("Right")
  })
})
