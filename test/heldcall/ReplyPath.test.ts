import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { announceWith, replyPath, type Follow } from "../../runtime/heldcall/ReplyPath.js"
import type { Command, Decision } from "../../runtime/heldcall/Decide.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { adjudicated, proposed } from "./Given.js"

// One commit path for replies: which commands' events the following drive commits, when the
// reply goes out, and which wake is written with that commit.
const command = (tag: Command["_tag"], extra: Record<string, unknown> = {}) => ({ _tag: tag, ...extra }) as unknown as Command
const works = (events: ReadonlyArray<HeldEvent> = [proposed(1)]): Decision => ({ reply: { status: 200 } as never, events, drive: "cached" })
const ends = (events: ReadonlyArray<HeldEvent> = [proposed(1)]): Decision => ({ reply: { status: 200 } as never, events })
const claim: HeldEvent = { type: "effect.dispatched", event_id: "d", held_id: "h", generation: 1, at: "2026-01-01T00:00:00.000Z", idempotency_key: "k", attempt: 1, owner: "k1", lease_until: "2026-01-01T00:00:02.000Z", policy_epoch: 1 }

describe("the reply path of a decision", () => {
  it("given a root proposal answered inline, then its drive commits it and the reply waits for the drive; the claim's wake is the only one", () => {
    const p = replyPath(command("Propose"), works(), "await")
    expect(p).toEqual({ drive: true, awaitDrive: true, announce: "none", project: false })
  })

  it("given a background proposal, then its drive commits it, the reply waits for that commit, and a plain wake goes with it unless the commit claims the call", () => {
    const p = replyPath(command("Propose"), works(), "fork")
    expect(p).toMatchObject({ drive: true, awaitDrive: false, announce: "plain" })
    expect(announceWith(p.announce, [proposed(1), adjudicated(1, { verdict: "ALLOW" })])).toBe("plain")
    expect(announceWith(p.announce, [proposed(1), adjudicated(1, { verdict: "ALLOW" }), claim])).toBe("none")
  })

  it("given a nested proposal, then it announces a plain wake even answered inline (its end must reach its parent)", () => {
    expect(replyPath(command("Propose", { edge: { parentId: "p" } }), works(), "await").announce).toBe("plain")
  })

  it("given an approval or a settlement, then the wake says who drives", () => {
    expect(replyPath(command("Attest"), works(), "fork").announce).toBe("driving")
    expect(replyPath(command("Settle"), works(), "fork").announce).toBe("driving")
  })

  it("given a decision that leaves no work, then it is committed alone and projected", () => {
    expect(replyPath(command("Ack"), ends(), "fork")).toEqual({ drive: false, awaitDrive: false, announce: "none", project: true })
  })

  it("given the caller drives (follow none), then the events are committed alone and not projected (the caller's drive does)", () => {
    expect(replyPath(command("ChangeEpoch"), works(), "none")).toEqual({ drive: false, awaitDrive: false, announce: "none", project: false })
  })
})

const tags: ReadonlyArray<Command["_tag"]> = ["Propose", "ProposeRefused", "Attach", "Attest", "Edit", "Extend", "Settle", "Cancel", "Disconnect", "Ack", "Report", "ChangeEpoch"]

describe("properties of the reply path", () => {
  it("a drive follows exactly when the decision leaves work and the caller does not drive; the reply waits for it only when awaited; nothing is announced without a drive or with a claim", () => {
    fc.assert(
      fc.property(fc.constantFrom(...tags), fc.boolean(), fc.constantFrom<Follow>("fork", "await", "none"), fc.boolean(), fc.boolean(), (tag, leavesWork, follow, nested, claims) => {
        const decision = leavesWork ? works() : ends()
        const p = replyPath(command(tag, nested ? { edge: { parentId: "p" } } : {}), decision, follow)
        expect(p.drive).toBe(leavesWork && follow !== "none")
        expect(p.awaitDrive).toBe(p.drive && follow === "await")
        expect(p.project).toBe(!leavesWork)
        if (!p.drive) expect(p.announce).toBe("none")
        if (claims) expect(announceWith(p.announce, [proposed(1), claim])).toBe("none")
      })
    )
  })
})
