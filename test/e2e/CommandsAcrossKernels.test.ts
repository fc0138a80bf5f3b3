import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { clientFor } from "../support/Principals.js"
import type { Parties } from "../support/Parties.js"
import { startDeployment, type Deployment } from "../support/Deployment.js"
import { eventually } from "../support/Stream.js"

// Every command of a held call's life sent through either of two kernels, in the order a user
// would send them and then again: the kernel that parked a call keeps its recent view while the
// other moves the call on. Each call must end as its last command says, the same command sent
// again must get the same answer from either kernel, and no ended call may stay open.

let deployment: Deployment
let parties: Parties

beforeAll(async () => {
  deployment = await startDeployment(2)
  parties = deployment.parties
}, 120_000)

afterAll(() => deployment?.stop(), 60_000)

let n = 0
const hold = async () => {
  const r = (await parties.alice.propose({ session_id: "s-cmds", turn_id: "t1", call_id: `cmd${++n}`, tool: "money_transfer", args: { from: `cmd-${n}`, to: "shop", amount: 2_500 }, preferences: { expires_in_ms: 600_000 } })) as { status: number; held_id: string }
  expect(r.status).toBe(202)
  return r.held_id
}

/** The statuses (and dispositions) of the same command sent `times` times. */
const repeated = async (times: number, send: () => Promise<{ status: number; disposition?: string }>) => {
  const out = []
  for (let i = 0; i < times; i++) {
    const r = await send()
    out.push(`${r.status}${r.disposition !== undefined ? ` ${r.disposition}` : ""}`)
  }
  return out
}

describe("a held call's commands through either of two kernels", () => {
  it("extend, edit, approve; cancel; veto: each call ends as its commands say, a command sent again gets one answer, and no ended call stays open", async () => {
    const { alice, carol } = parties
    const zoe = clientFor(parties.witnessConn, "compliance:zoe")
    const dave = clientFor(parties.witnessConn, "user:dave")
    const ended: Array<string> = []
    for (let i = 0; i < 3; i++) {
      // Extended, edited by carol, approved by dave (the editor's own approval never counts):
      // it runs with the edited arguments.
      const approved = await hold()
      expect((await carol.extend(approved, "human", new Date(Date.now() + 30 * 60_000))).status).toBe(202)
      const edited = await carol.edit(approved, "human", { from: `cmd-${n}`, to: "shop", amount: 2_400 })
      expect(edited.status).toBe(202)
      expect((await dave.decide(approved, "human", "approve")).status).toBe(202)
      const done = await alice.result(approved, { sessionId: "s-cmds", timeoutMs: 30_000 })
      expect(done.outcome).toBe("completed")
      expect(done.call_digest).toBe(edited.call_digest)
      expect(await repeated(3, () => carol.decide(approved, "human", "approve"))).toEqual(["409 stale", "409 stale", "409 stale"])
      expect(await repeated(3, () => alice.cancel(approved))).toEqual(["409", "409", "409"])

      // Cancelled by its agent.
      const cancelled = await hold()
      expect(await repeated(3, () => alice.cancel(cancelled))).toEqual(["200", "200", "200"])
      expect((await alice.result(cancelled, { sessionId: "s-cmds", timeoutMs: 30_000 })).outcome).toBe("cancelled")
      expect(await repeated(3, () => carol.decide(cancelled, "human", "approve"))).toEqual(["409 stale", "409 stale", "409 stale"])

      // Vetoed by compliance.
      const rejected = await hold()
      expect((await zoe.decide(rejected, "compliance", "reject", "not this one")).status).toBe(202)
      expect((await alice.result(rejected, { sessionId: "s-cmds", timeoutMs: 30_000 })).outcome).toBe("denied")
      ended.push(approved, cancelled, rejected)
    }
    for (const heldId of ended) await eventually(async () => !(await deployment.openIndexHas(heldId)), 30_000)
  }, 180_000)
})
