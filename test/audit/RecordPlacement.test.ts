import { describe, expect, it } from "vitest"
import { recordPlacement } from "../../runtime/audit/RecordPlacement.js"
import type { PolicyRecord } from "../../runtime/audit/TrustedRegistry.js"

// Where a policy record sits among the events around it: a record moved to another place of the
// stream lands among events whose times, or whose claimed epochs, contradict it.
const t = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString()
const record = (epoch: number, seq: number, at: string): PolicyRecord => ({ type: "policy.applied", event_id: `policy.applied:e${epoch}`, epoch, at, profiles: [], seq, profiles_digest: "" })
const run = (records: ReadonlyArray<PolicyRecord>, events: ReadonlyArray<{ seq: number; at: string; epoch?: number }>) => {
  const p = recordPlacement(records, 5_000)
  for (const e of events) {
    p.see(e.seq, e.at)
    if (e.epoch !== undefined) p.claim(e.seq, "h", e.epoch, e.at)
  }
  return p.finding().violations.map((v) => v.message)
}

describe("policy record placement", () => {
  const events = [
    { seq: 2, at: t(10), epoch: 1 },
    { seq: 3, at: t(20), epoch: 1 },
    { seq: 5, at: t(60), epoch: 2 },
    { seq: 6, at: t(70), epoch: 2 }
  ]

  it("records where they were written pass, and an event decided under a new epoch just before its record is appended is the race, not a move", () => {
    expect(run([record(1, 1, t(0)), record(2, 4, t(50))], events)).toEqual([])
    expect(run([record(1, 1, t(0)), record(2, 4, t(50))], [...events, { seq: 3.5, at: t(51), epoch: 2 }])).toEqual([])
  })

  it("a record moved later: events after its time sit before it, and events claim its epoch before it", () => {
    const found = run([record(1, 1, t(0)), record(2, 7, t(50))], events)
    expect(found).toEqual(expect.arrayContaining([expect.stringMatching(/^policy record moved: epoch 2 \(at .*\) sits after an event stamped/), expect.stringMatching(/^an event at seq 5 claims epoch 2, whose record sits later/)]))
  })

  it("a record moved earlier: it sits before events stamped long before it", () => {
    expect(run([record(1, 1, t(0)), record(2, 1.5, t(50))], events)).toEqual([expect.stringMatching(/^policy record moved: epoch 2 \(at .*\) sits before an event stamped/)])
  })
})
