import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Schema } from "effect"
import { chainCommit, commitDigest, commitOf, encodeCommit } from "../../runtime/schema/Commit.js"
import { HeldEvent } from "../../runtime/schema/Events.js"
import { policyHistory } from "../../runtime/audit/PolicyHistory.js"
import { recordPlacement } from "../../runtime/audit/RecordPlacement.js"
import { kernelKeysOf } from "../../runtime/audit/KernelKeys.js"
import { checkCall, type CallEnvironment } from "../../runtime/audit/replay/CheckCall.js"
import { planOf, DefaultStoreSkewMs } from "../../runtime/audit/replay/Plan.js"
import { replayTally } from "../../runtime/audit/replay/Tally.js"
import { archiveSigners, policyRecordsOf, type Trusted } from "../../runtime/audit/replay/Verify.js"
import { reportOf } from "../../runtime/audit/replay/Report.js"
import { skipped } from "../../runtime/audit/Audit.js"
import type { Collected } from "../../runtime/audit/replay/Collect.js"
import type { RawMessage } from "../../runtime/audit/StreamReader.js"
import { testProfile } from "../support/Principals.js"

// The replay's stages one by one, over the recorded witnessed transfer stored as chained commits
// (one event per commit), as the stream would hold them.
const fixture = JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "witnessed-transfer.events.json"), "utf8")) as Array<Record<string, unknown> & { seq: number }>
const decode = Schema.decodeUnknownSync(HeldEvent)
const events = fixture.map(({ seq, ...e }) => ({ seq, event: decode(e) }))
const heldId = events[0]!.event.held_id
const layout = { stream: "WK_EVENTS", prefix: "wk.v1.events.", firstSeq: 1, lastSeq: events.at(-1)!.seq, messages: events.length, deleted: 0 }
const profile = testProfile({ rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human", count: 2 }, veto: ["compliance"] } } } })
const policy = policyHistory([{ type: "policy.applied", event_id: "policy.applied:e1", epoch: 1, at: new Date(Date.parse(events[0]!.event.at) - 60_000).toISOString(), profiles: [profile] }])

/** The fixture as stored messages: chained commits, stored when their event says (or `storedLate` ms later). */
const messagesOf = (storedLate = 0): Array<RawMessage> => {
  let prev = ""
  return events.map(({ seq, event }) => {
    const data = encodeCommit(chainCommit(commitOf([event]), prev, undefined))
    prev = commitDigest(data)
    return { seq, subject: `wk.v1.events.${heldId}`, data, time: Date.parse(event.at) + storedLate }
  })
}
const env: CallEnvironment = { ctx: { policy, newestAt: Date.parse(events.at(-1)!.event.at), settleMs: 30_000 }, kernelKeys: undefined, storeSkewMs: DefaultStoreSkewMs }
const trustedWith = (over: Partial<Trusted> = {}): Trusted => ({
  registry: { records: [], finding: { checked: 1, violations: [], unverified: [] }, origin: "trust root: 1 admin(s)", rooted: true },
  policy,
  placement: recordPlacement([], 5000),
  kernelKeys: undefined,
  streamViolations: [],
  archiveViolations: [],
  unsignedArchives: 0,
  ...over
})

describe("replay stages", () => {
  it("plan: the options resolved (defaults, what the checkpoint chain must hold, whole stream or not)", () => {
    const p = planOf({ factsBucket: null, anchored: [new Uint8Array([1])], keptCheckpoint: new Uint8Array([2]) }, layout, 0)
    expect(p).toMatchObject({ stream: "WK_EVENTS", wholeStream: true, factsBucket: null, sessions: "WK_SESSIONS", rerun: true, storeSkewMs: DefaultStoreSkewMs })
    expect(p.mustHold).toHaveLength(2)
    expect(planOf({ selection: { fromSeq: 5 }, rerunPlugins: false }, layout, 0)).toMatchObject({ wholeStream: false, rerun: false, factsBucket: "wk_facts", mustHold: [] })
  })

  it("check per call: the recorded call passes every per-call check; a commit on another call's subject and a late store time are named", () => {
    const ok = checkCall(heldId, messagesOf(), env)
    expect(ok.stream).toEqual([])
    expect(ok.storeTime).toEqual([])
    expect(ok.chain.violations).toEqual([])
    expect(ok.chain.unchained).toBe(false)
    expect(ok.audited?.findings.flatMap((f) => f.violations)).toEqual([])
    expect(ok.placed).toHaveLength(events.length)

    const late = checkCall(heldId, messagesOf(DefaultStoreSkewMs + 60_000), env)
    expect(late.storeTime.map((v) => v.check)).toEqual(events.map(() => "store-time"))

    const moved = checkCall("h_other", messagesOf(), env)
    expect(moved.stream.length).toBeGreaterThan(0)
    expect(moved.stream[0]!.message).toContain(`a commit of ${heldId} is stored on the subject of h_other`)

    const dropped = checkCall(heldId, messagesOf().filter((_, i) => i !== 2), env)
    expect(dropped.chain.violations.map((v) => v.seqs.at(-1))).toEqual([events[3]!.seq])
  })

  it("tally: outcomes summed per check; a call with no decodable commit is not a held call", () => {
    const t = replayTally(trustedWith(), { keepPluginSteps: false })
    t.add(checkCall(heldId, messagesOf(), env))
    t.add(checkCall("h_broken", [{ seq: 99, subject: "wk.v1.events.h_broken", data: new TextEncoder().encode("{"), time: 0 }], env))
    const done = t.done(env.ctx, false)
    expect(done.heldCalls).toBe(1)
    expect(done.streamViolations.map((v) => v.held_id)).toEqual(["h_broken"])
    expect(done.chain.checked).toBeGreaterThan(0)
    expect(done.traced.map((c) => c.heldId)).toEqual([heldId])
    expect(done.held.map((c) => c.name)).toContain("signatures")
  })

  it("verify: records that do not decode are stream violations; unsigned purges are counted without kernel keys and refused with them", () => {
    const { records, violations } = policyRecordsOf([{ seq: 1, subject: "wk.v1.events._policy", data: new TextEncoder().encode("not json"), time: 0 }])
    expect(records).toEqual([])
    expect(violations).toMatchObject([{ check: "stream", held_id: "_policy", seqs: [1] }])
    const signers = [{ seq: 7, key: undefined }]
    expect(archiveSigners(signers, undefined)).toEqual({ violations: [], unsigned: 1 })
    expect(archiveSigners(signers, kernelKeysOf(["k"], [])).violations).toMatchObject([{ check: "archive", seqs: [7] }])
  })

  it("report: every check in order, and fields that say what they are", () => {
    const plan = planOf({ anchored: [new Uint8Array([1])] }, layout, 0)
    const t = replayTally(trustedWith(), { keepPluginSteps: false })
    t.add(checkCall(heldId, messagesOf(), env))
    const tallied = t.done(env.ctx, false)
    const collected: Collected = {
      calls: new Map(), archived: { byHeld: new Map(), seqs: new Set(), records: 0, commits: 0, signers: [], violations: [] }, checkpoints: [], records: [], rotations: [],
      storeTimes: new Map(), events: events.length, backfilled: 0, archivedCommits: 0, firstSeq: 1, lastSeq: layout.lastSeq, streamViolations: [], archiveViolations: [], deliveries: { _tag: "skipped", note: "not read" }
    }
    const passed = (name: "checkpoints" | "standing" | "plugin-pins" | "plugin-rerun" | "bearer-tokens") => ({ ...skipped(name, ""), status: "passed" as const })
    const wide = { checkpoints: passed("checkpoints"), standing: passed("standing"), projection: skipped("projection", "off"), projectionSummary: null, pins: passed("plugin-pins"), rerun: passed("plugin-rerun"), bearer: passed("bearer-tokens") }
    const r = reportOf(plan, collected, trustedWith(), tallied, wide, 10)
    expect(r).toMatchObject({ ok: true, held_calls: 1, registry_rooted: true, registry_origin: "trust root: 1 admin(s)", checkpoints_anchored: true, policy_epochs: [1] })
    expect(r.checks.map((c) => c.name).slice(0, 6)).toEqual(["registry", "stream", "archive", "commit-chain", "checkpoints", "store-time"])
    const failedCheckpoints = reportOf(plan, collected, trustedWith({ registry: { ...trustedWith().registry, rooted: false, origin: "UNANCHORED: ..." } }), tallied, { ...wide, checkpoints: { ...wide.checkpoints, status: "failed" } }, 10)
    expect(failedCheckpoints).toMatchObject({ registry_rooted: false, checkpoints_anchored: false })
  })
})
