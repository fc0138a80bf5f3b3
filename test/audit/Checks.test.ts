import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Schema } from "effect"
import { auditHistories } from "../../runtime/audit/Audit.js"
import type { CheckName } from "../../runtime/audit/AuditReport.js"
import { policyHistory } from "../../runtime/audit/PolicyHistory.js"
import type { CheckContext, DeliveryMessage } from "../../runtime/audit/checks/Check.js"
import { HeldEvent, type SequencedEvent } from "../../runtime/schema/Events.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { testProfile } from "../support/Principals.js"
import { callDigest } from "../../runtime/schema/Canonical.js"

// The pure checks over in-memory event lists: the recorded witnessed transfer (an edit, two
// refused attestations, a 2-of-human quorum), as recorded and with one thing changed.
const fixture = JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "witnessed-transfer.events.json"), "utf8")) as Array<Record<string, unknown> & { seq: number }>
const decode = Schema.decodeUnknownSync(HeldEvent)
const recorded: Array<SequencedEvent> = fixture.map(({ seq, ...e }) => ({ seq, index: 0, event: decode(e) }))
const heldId = recorded[0]!.event.held_id
const t0 = recorded[0]!.event.at
const profile = testProfile({ rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human", count: 2 }, veto: ["compliance"] } } } })
const before = (iso: string, ms: number) => new Date(Date.parse(iso) - ms).toISOString()
const record = (epoch: number, at: string, profiles: ReadonlyArray<Profile> = [profile]) => ({ type: "policy.applied" as const, event_id: `policy.applied:e${epoch}`, epoch, at, profiles })

const ctxWith = (over: Partial<CheckContext> = {}): CheckContext => ({
  policy: policyHistory([record(1, before(t0, 60_000))]),
  newestAt: Date.parse(recorded.at(-1)!.event.at),
  settleMs: 30_000,
  ...over
})
const audit = (events: ReadonlyArray<SequencedEvent>, ctx = ctxWith()) => auditHistories([{ heldId, events }], ctx).checks
const failed = (checks: ReturnType<typeof audit>): Array<CheckName> => checks.filter((c) => c.status === "failed").map((c) => c.name)
const check = (checks: ReturnType<typeof audit>, name: CheckName) => checks.find((c) => c.name === name)!
const edit = (f: (e: Record<string, unknown>, seq: number) => Record<string, unknown> | null): Array<SequencedEvent> =>
  recorded.flatMap(({ seq, event }) => {
    const out = f(structuredClone(event) as unknown as Record<string, unknown>, seq)
    return out === null ? [] : [{ seq, index: 0, event: out as unknown as HeldEvent }]
  })
const accepted = recorded.filter((e) => e.event.type === "attestation.accepted" && e.event.generation === 2 && e.event.decision === "approve")

describe("pure checks over the recorded witnessed transfer", () => {
  it("the recorded history passes every check", () => {
    const checks = audit(recorded)
    expect(failed(checks)).toEqual([])
    expect(check(checks, "signatures")).toMatchObject({ status: "passed", checked: 9 })
    expect(check(checks, "attestation-binding")).toMatchObject({ status: "passed", checked: 4 })
    expect(check(checks, "effect-safety")).toMatchObject({ status: "passed", checked: 1 })
  })

  it("with no policy record, key registration is unverified (pending), not passed and not failed", () => {
    const checks = audit(recorded, ctxWith({ policy: policyHistory([]) }))
    expect(failed(checks)).toEqual([])
    expect(check(checks, "signatures").status).toBe("pending")
    expect(check(checks, "signatures").unverified.length).toBe(9)
  })

  it("keys are judged against the registry in force at the event's time", () => {
    const withoutCarol = { ...profile, principals: Object.fromEntries(Object.entries(profile.principals!).filter(([p]) => p !== "user:carol")) }
    // carol was never registered: her attestations fail signatures (and acceptance).
    const never = audit(recorded, ctxWith({ policy: policyHistory([record(1, before(t0, 60_000), [withoutCarol])]) }))
    expect(failed(never)).toEqual(expect.arrayContaining(["signatures", "attestation-binding"]))
    expect(check(never, "signatures").violations.every((v) => v.message.includes("user:carol"))).toBe(true)
    // carol removed an hour after the call: the registry in force at the time still had her.
    const later = audit(recorded, ctxWith({ policy: policyHistory([record(1, before(t0, 60_000)), record(2, new Date(Date.parse(t0) + 3_600_000).toISOString(), [withoutCarol])]) }))
    expect(failed(later)).toEqual([])
  })

  it("an approval removed: the 2-of-human quorum no longer held at dispatch -> effect-safety", () => {
    // carol approved and then revoked; dave's and erin's approvals released the call.
    const gone = accepted.find((e) => e.event.type === "attestation.accepted" && e.event.witness === "user:dave")!.seq
    const checks = audit(edit((e, seq) => (seq === gone ? null : e)))
    expect(failed(checks)).toEqual(["effect-safety"])
    expect(check(checks, "effect-safety").violations[0]).toMatchObject({ held_id: heldId, seqs: [recorded.find((e) => e.event.type === "effect.dispatched")!.seq] })
    expect(check(checks, "effect-safety").violations[0]!.message).toContain("did not satisfy the witness rule")
  })

  it("an approval counted at dispatch after the admin removed its key -> attestation-binding names it", () => {
    // dave keeps his class but loses his key between his approval and the dispatch it released.
    const daveKeyless = { ...profile, principals: { ...profile.principals, "user:dave": { keys: [], classes: ["human"] } } }
    const dispatched = recorded.find((e) => e.event.type === "effect.dispatched")!
    const removedAt = before(dispatched.event.at, 5)
    const checks = audit(recorded, ctxWith({ policy: policyHistory([record(1, before(t0, 60_000)), record(2, removedAt, [daveKeyless])]) }))
    const daves = accepted.find((e) => e.event.type === "attestation.accepted" && e.event.witness === "user:dave")!.seq
    expect(check(checks, "attestation-binding").violations).toEqual([
      expect.objectContaining({ seqs: [daves, dispatched.seq], message: expect.stringMatching(/^approval by user:dave counted at dispatch although its key .* was no longer registered to it \(epoch 2\)$/) })
    ])
    // Removed only after the dispatch: nothing to name.
    expect(check(audit(recorded, ctxWith({ policy: policyHistory([record(1, before(t0, 60_000)), record(2, new Date(Date.parse(dispatched.event.at) + 3_600_000).toISOString(), [daveKeyless])]) })), "attestation-binding").violations).toEqual([])
  })

  it("a witness's reason written into the event but not signed -> attestation-binding", () => {
    const target = accepted[0]!.seq
    const checks = audit(edit((e, seq) => (seq === target ? { ...e, reason: "the witness never said this" } : e)))
    expect(failed(checks)).toEqual(["attestation-binding"])
    expect(check(checks, "attestation-binding").violations[0]!.message).toContain("reason differ")
  })

  it("an approval re-bound to generation 1 (event and signed payload) -> attestation-binding and signatures", () => {
    const target = accepted[0]!.seq
    const checks = audit(edit((e, seq) => {
      if (seq !== target) return e
      const env = e["envelope"] as { payload: Record<string, unknown> }
      return { ...e, generation: 1, envelope: { ...env, payload: { ...env.payload, generation: 1 } } }
    }))
    expect(failed(checks)).toEqual(expect.arrayContaining(["attestation-binding", "signatures"]))
    expect(check(checks, "attestation-binding").violations[0]!.message).toContain("generation 1")
  })

  it("an expired approval recorded as accepted (event only) -> attestation-binding; the dispatch it released fails effect-safety", () => {
    const target = accepted.find((e) => e.event.type === "attestation.accepted" && e.event.witness === "user:erin")!.seq
    const checks = audit(edit((e, seq) => (seq === target ? { ...e, expires_at: before(String(e["at"]), 1000) } : e)))
    expect(failed(checks)).toEqual(["attestation-binding", "effect-safety"])
    expect(check(checks, "attestation-binding").violations[0]!.message).toContain("expires_at")
  })

  it("a second dispatch under the same key: blind without a read-back, allowed after read-back applied=false", () => {
    const d = recorded.find((e) => e.event.type === "effect.dispatched")!
    const disp = d.event as Extract<HeldEvent, { type: "effect.dispatched" }>
    const key = disp.idempotency_key
    const at = disp.at
    const base = { held_id: heldId, generation: disp.generation, at }
    const redispatch = (withReadback: boolean): Array<SequencedEvent> => {
      const extra: Array<HeldEvent> = [
        { ...base, type: "effect.outcome_unknown", event_id: `effect.outcome_unknown:${heldId}:${key}:a1`, idempotency_key: key, reason: "lost", needs_witness: false },
        ...(withReadback ? [{ ...base, type: "effect.readback" as const, event_id: `effect.readback:${heldId}:${key}:a1`, idempotency_key: key, applied: false }] : []),
        { ...base, type: "execution.leased", event_id: `execution.leased:${heldId}:${key}:a2`, owner: "k2", lease_until: disp.lease_until ?? at },
        { ...disp, event_id: `effect.dispatched:${heldId}:${key}:a2`, attempt: 2, owner: "k2" }
      ]
      const i = recorded.indexOf(d)
      // Sequences stay increasing: the inserted events go between the dispatch and the record.
      return [...recorded.slice(0, i + 1), ...extra.map((event, j) => ({ seq: d.seq, index: j + 1, event })), ...recorded.slice(i + 1)]
    }
    const blind = audit(redispatch(false))
    expect(failed(blind)).toEqual(["effect-safety"])
    expect(check(blind, "effect-safety").violations.map((v) => v.message).join("\n")).toContain("blind retry")
    expect(failed(audit(redispatch(true)))).toEqual([])
  })

  it("a quarantined result that reached a delivery with its bytes -> delivery", () => {
    const quarantined = edit((e) => (e["type"] === "result.admitted" ? { ...e, type: "result.quarantined", by: "plugin:secret-scan@1.0.0", reason: "secret", result: undefined } : e))
    const published = recorded.find((e) => e.event.type === "delivery.published")!.event as Extract<HeldEvent, { type: "delivery.published" }>
    const msg = (result: unknown): DeliveryMessage => ({ seq: 1, held_id: heldId, delivery_id: published.delivery_id, outcome: "completed", admission: "quarantined", result })
    const leaked = audit(quarantined, ctxWith({ deliveries: new Map([[heldId, [msg({ amount: 5000 })]]]) }))
    expect(failed(leaked)).toEqual(["delivery"])
    expect(check(leaked, "delivery").violations[0]!.message).toContain("quarantined result reached delivery")
    expect(failed(audit(quarantined, ctxWith({ deliveries: new Map([[heldId, [msg(null)]]]) })))).toEqual([])
    // A recorded delivery with no message in the sessions stream.
    expect(failed(audit(recorded, ctxWith({ deliveries: new Map() })))).toEqual(["delivery"])
  })

  it("a delivery with no record, stored after the events were read, is unverified (its call moved on after the read); stored before, it fails", () => {
    const unrecorded = edit((e) => (e["type"] === "delivery.published" ? null : e))
    const published = recorded.find((e) => e.event.type === "delivery.published")!.event as Extract<HeldEvent, { type: "delivery.published" }>
    const endAt = Date.parse(recorded.at(-1)!.event.at)
    const msg = (time: number): DeliveryMessage => ({ seq: 9, held_id: heldId, delivery_id: published.delivery_id, outcome: "failed", admission: null, result: null, time })
    const later = audit(unrecorded, ctxWith({ newestAt: endAt + 60_000, eventsReadAt: endAt + 60_000, deliveries: new Map([[heldId, [msg(endAt + 61_000)]]]) }))
    expect(check(later, "delivery")).toMatchObject({ status: "pending" })
    expect(check(later, "delivery").unverified.map((u) => u.message)).toContainEqual(expect.stringMatching(/stored after the events were read/))
    const before = audit(unrecorded, ctxWith({ newestAt: endAt + 60_000, eventsReadAt: endAt + 60_000, deliveries: new Map([[heldId, [msg(endAt + 1000)]]]) }))
    expect(check(before, "delivery").violations.map((v) => v.message)).toContainEqual(expect.stringMatching(/has no delivery.published in the call's history/))
  })

  it("a held call that ended and was never delivered fails once it had time to settle", () => {
    const undelivered = edit((e) => (String(e["type"]).startsWith("delivery.") ? null : e))
    const endAt = Date.parse(recorded.find((e) => e.event.type === "result.admitted")!.event.at)
    expect(failed(audit(undelivered, ctxWith({ newestAt: endAt + 60_000 })))).toEqual(["delivery"])
    const settling = audit(undelivered, ctxWith({ newestAt: endAt + 1000 }))
    expect(check(settling, "delivery").status).toBe("pending")
  })
})

describe("an event removed or moved leaves a step without its cause -> consistency", () => {
  const settledCtx = ctxWith({ newestAt: Date.parse(recorded.at(-1)!.event.at) + 60_000 })
  const without = (type: string) => edit((e) => (e["type"] === type ? null : e))
  const messagesOf = (events: ReadonlyArray<SequencedEvent>, ctx = settledCtx) => check(audit(events, ctx), "consistency").violations.map((v) => v.message)

  it("the recorded history is consistent", () => {
    expect(check(audit(recorded, settledCtx), "consistency")).toMatchObject({ status: "passed", violations: [] })
  })

  it("call.held removed: attestations of a generation never held, a REQUIRE_WITNESS generation never held", () => {
    const m = messagesOf(without("call.held"))
    expect(m).toEqual(expect.arrayContaining([expect.stringMatching(/^attestation by user:\w+ accepted for generation 2, which was never held/), "generation 2 was adjudicated REQUIRE_WITNESS and never held (no call.held)"]))
  })

  it("effect.recorded removed: the admission has no effect before it", () => {
    expect(messagesOf(without("effect.recorded"))).toEqual(expect.arrayContaining([expect.stringMatching(/^result.admitted with no effect recorded before it/)]))
  })

  it("result.admitted moved before effect.recorded", () => {
    const i = recorded.findIndex((e) => e.event.type === "effect.recorded")
    const moved = [...recorded]
    ;[moved[i], moved[i + 1]] = [{ ...moved[i + 1]!, seq: moved[i]!.seq }, { ...moved[i]!, seq: moved[i + 1]!.seq }]
    expect(messagesOf(moved)).toEqual(expect.arrayContaining([expect.stringMatching(/^result.admitted with no effect recorded before it \(execution was dispatched\)/)]))
  })

  it("result.admitted removed, or result.quarantined removed: a delivery before the call ended, and its result never admitted", () => {
    const quarantined = edit((e) => (e["type"] === "result.admitted" ? { ...e, type: "result.quarantined", by: "plugin:secret-scan@1.0.0", reason: "secret", result: undefined } : e))
    expect(failed(audit(quarantined, settledCtx))).toEqual([])
    for (const events of [without("result.admitted"), quarantined.filter((e) => e.event.type !== "result.quarantined")]) {
      expect(messagesOf(events)).toEqual(expect.arrayContaining([expect.stringMatching(/^delivery .* published before the call ended/), "its effect was recorded but its result was never admitted or quarantined"]))
    }
  })

  it("delivery.published removed: its acknowledgement acknowledges nothing", () => {
    expect(messagesOf(without("delivery.published"))).toEqual([expect.stringMatching(/^delivery .* acknowledged but never published/)])
  })

  it("effect.recorded and everything after it removed: a dispatch with no outcome, once settled (pending before)", () => {
    const cut = recorded.findIndex((e) => e.event.type === "effect.recorded")
    const dispatchedOnly = recorded.slice(0, cut)
    expect(messagesOf(dispatchedOnly)).toEqual(["it was dispatched and no outcome was ever recorded (effect.recorded missing)"])
    expect(check(audit(dispatchedOnly, ctxWith({ newestAt: Date.parse(recorded[cut - 1]!.event.at) })), "consistency").status).toBe("pending")
  })

  it("a veto removed: the denial in the vetoing witness's name has no reject behind it", () => {
    // The approvals revoked by a compliance reject: the recorded history up to the quorum, then zoe's veto and the denial.
    const upTo = recorded.findIndex((e) => e.event.type === "readiness.changed")
    const last = recorded[upTo - 1]!
    const zoe = { ...(accepted[0]!.event as object), witness: "compliance:zoe", class: "compliance", decision: "reject", event_id: "attestation.accepted:zoe" } as unknown as HeldEvent
    const denied = { type: "call.denied", event_id: `call.denied:${heldId}:veto`, held_id: heldId, generation: 2, at: last.event.at, reasons: [{ by: "compliance:zoe", reason: "veto by compliance witness compliance:zoe" }] } as HeldEvent
    const vetoed = [...recorded.slice(0, upTo), { seq: 100, index: 0, event: zoe }, { seq: 101, index: 0, event: denied }]
    expect(messagesOf(vetoed)).toEqual([])
    expect(messagesOf(vetoed.filter((e) => e.seq !== 100))).toEqual([expect.stringMatching(/^denied in the name of compliance:zoe .* has no valid reject for generation 2/)])
  })
})

describe("the signed proposal is what the call records", () => {
  it("args.to changed with call_digest recomputed -> signatures", async () => {
    const { callDigest } = await import("../../runtime/schema/Canonical.js")
    const changed = edit((e) => {
      if (e["type"] !== "call.proposed") return e
      const args = { ...(e["args"] as Record<string, unknown>), to: "acct-forger" }
      return { ...e, args, call_digest: callDigest(String(e["tool"]), args) }
    })
    const checks = audit(changed)
    expect(check(checks, "signatures").violations.map((v) => v.message)).toEqual(expect.arrayContaining(["call.proposed: args are not the signed proposal's args"]))
  })
})

describe("policy history", () => {
  it("finds the epochs in force around a time, within the skew", () => {
    const h = policyHistory([record(2, "2026-01-01T00:01:00.000Z"), record(1, "2026-01-01T00:00:00.000Z"), record(1, "2026-01-01T00:00:00.000Z")], 5000)
    expect(h.epochs.map((e) => e.epoch)).toEqual([1, 2])
    expect(h.around("2025-12-31T23:00:00.000Z")).toEqual([])
    expect(h.around("2026-01-01T00:00:30.000Z").map((e) => e.epoch)).toEqual([1])
    expect(h.around("2026-01-01T00:00:58.000Z").map((e) => e.epoch)).toEqual([1, 2])
    expect(h.around("2026-01-01T00:02:00.000Z").map((e) => e.epoch)).toEqual([2])
    expect(h.at(0, "2026-01-01T00:00:59.000Z")?.epoch).toBe(1)
  })
})

describe("transform-output: the executed call is the proposal or the recorded transform's output", () => {
  const adjudicated = recorded.find((e) => e.event.type === "call.adjudicated")!
  const proposed = recorded.find((e) => e.event.type === "call.proposed" && e.event.generation === adjudicated.event.generation)!.event as Extract<HeldEvent, { type: "call.proposed" }>
  const withExecuted = (executed: { tool: string; args: Record<string, unknown>; call_digest: string }, decisions: Array<Record<string, unknown>>) =>
    edit((e, seq) => (seq === adjudicated.seq && e["type"] === "call.adjudicated" ? { ...e, executed, decisions } : e))
  const replaced = { ...proposed.args, to: "acct-canonical" }

  it("a replacement recorded by a transform decision passes; one no decision produced, or another than the last decision's, fails", () => {
    const executed = { tool: proposed.tool, args: replaced, call_digest: callDigest(proposed.tool, replaced) }
    const decision = { by: "plugin:path-canon@1", digest: "d".repeat(64), output: { action: "replace", tool: proposed.tool, args: replaced, reason: "canonical account" } }
    expect(check(audit(withExecuted(executed, [decision])), "transform-output")).toMatchObject({ status: "passed" })
    const none = audit(withExecuted(executed, []))
    expect(check(none, "transform-output").violations.map((v) => v.message)).toEqual([expect.stringMatching(/is not the proposal, and no recorded transform decision replaced it/)])
    const other = { ...decision, output: { ...decision.output, args: { ...replaced, to: "acct-other" } } }
    expect(check(audit(withExecuted(executed, [other])), "transform-output").violations.map((v) => v.message)).toEqual([expect.stringMatching(/is not the output of the last recorded transform decision/)])
  })

  it("an executed call whose call_digest is not its own fails", () => {
    const executed = { tool: proposed.tool, args: proposed.args as Record<string, unknown>, call_digest: "0".repeat(64) }
    expect(check(audit(withExecuted(executed, [])), "transform-output").violations.map((v) => v.message)).toEqual([expect.stringMatching(/call_digest is not sha256/)])
  })
})

