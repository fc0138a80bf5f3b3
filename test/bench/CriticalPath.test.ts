import { describe, expect, it } from "vitest"
import { callPathsOf, type TimelineEntry } from "../../bench/critical-path.js"

const request = (t: number): TimelineEntry => [t, "R", "MSG wk.v1.calls.propose 5 _INBOX.x 400"]
const read = (t: number): TimelineEntry => [t, "R", "MSG _INBOX_kernel.abc 1 90"]
const write = (t: number, text: string): TimelineEntry => [t, "W", text]

/** The four writes of an ALLOW call from `t`, each segment 1 ms of work or 2 ms of waiting. */
const allow = (t: number): Array<TimelineEntry> => [
  request(t),
  write(t + 1, "HPUB wk.v1.wakes.h_1 30 30\r\n\r\nHPUB wk.v1.events.h_1 90 900"),
  read(t + 3),
  write(t + 4, "PUB wk.v1.tools.money_transfer.invoke _INBOX 200"),
  read(t + 6),
  write(t + 7, "HPUB wk.v1.events.h_1 90 900"),
  read(t + 9),
  write(t + 10, "PUB $JS.ACK.WK_WAKES 0\r\n\r\nPUB _INBOX.agent 300")
]

describe("the critical path of a sequential ALLOW, read from the kernel's socket timeline", () => {
  it("splits each call into the kernel's work and its waits", () => {
    expect(callPathsOf(allow(0))).toEqual([{ toCommitA: 1, commitAWait: 2, toTool: 1, toolWait: 2, toCommitB: 1, commitBWait: 2, toReply: 1 }])
  })

  it("counts a wait up to the last read before the next write (the wake's ack may come on its own)", () => {
    const [req, a, ackA, ...rest] = allow(0)
    const [p] = callPathsOf([req!, a!, ackA!, read(3.5), ...rest])
    expect(p).toMatchObject({ commitAWait: 2.5, toTool: 0.5 })
  })

  it("does not count the projection's own write after the reply as one of the call's writes", () => {
    const projected = [...allow(0), read(10.5), write(11, "HPUB $KV.wk_facts.h_1 _INBOX_kernel.x.9 52 2026")]
    expect(callPathsOf(projected)).toEqual([{ toCommitA: 1, commitAWait: 2, toTool: 1, toolWait: 2, toCommitB: 1, commitBWait: 2, toReply: 1 }])
  })

  it("leaves out a call that took another path or overlapped another call", () => {
    const held: Array<TimelineEntry> = [request(100), write(101, "HPUB wk.v1.events.h_2 90 900"), read(103), write(104, "PUB _INBOX.agent 300")]
    const overlapped = allow(200)
    overlapped.splice(3, 0, request(203.5))
    const paths = callPathsOf([...allow(0), ...held, ...overlapped, ...allow(300)])
    expect(paths).toHaveLength(2)
  })
})
