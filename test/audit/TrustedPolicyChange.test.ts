import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { checkOf, copyStream, failedChecks, readAll, replayAs, trustRootFor } from "./support.js"

// A widening that ran as a witnessed kernel_policy_apply: the trusted registry follows it from
// the root through its call's signed proposal and the second admin's signed approval; the same
// record without that approval (removed from the copy) is not trusted.
let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let heldId = ""
const profile = testProfile()
const widened = { ...profile, grants: { ...profile.grants, "agent:mallory": ["bank_balance"] } }

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [k, w] = await Promise.all([connectAs(nats.servers, "kernel"), connectAs(nats.servers, "witness")])
  conns = [k, w]
  kernelConn = k
  const root = clientFor(k, "admin:root")
  // The widening is held as a call of its own, approved by the second admin.
  const applied = await applyPolicyWitnessed(root, clientFor(w, "admin:ops"), widened)
  expect(applied).toMatchObject({ status: 200, policy_epoch: 2 })
  heldId = applied.held_id!
}, 90_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("a witnessed widening under a trust root", () => {
  it("verifies: the record's call carries an admin's signed proposal and another admin's signed approval", async () => {
    const r = await replayAs(nats.servers, "kernel", { factsBucket: null, trust: trustRootFor([profile]) })
    expect(checkOf(r, "registry")).toMatchObject({ status: "passed", violations: [] })
    expect(r.policy_epochs).toEqual([1, 2])
  })

  it("the record carries the signatures that authorized it: the admin's signed proposal and the second admin's approval", async () => {
    const record = (await readAll(kernelConn)).find((m) => m.subject === "wk.v1.events._policy" && m.body["epoch"] === 2)!
    const by = record.body["applied_by"] as { held_id: string; signatures: { proposal: { payload: Record<string, unknown> }; approvals: Array<{ payload: Record<string, unknown> }> } }
    expect(by.held_id).toBe(heldId)
    expect(by.signatures.proposal.payload["principal"]).toBe("admin:root")
    expect(by.signatures.approvals.map((a) => [a.payload["principal"], a.payload["decision"]])).toEqual([["admin:ops", "approve"]])
  })

  it("the change's call removed from a copy: the record's own signatures still prove epoch 2", async () => {
    const stream = await copyStream(kernelConn, await readAll(kernelConn), (ms) => ms.filter((m) => m.subject !== `wk.v1.events.${heldId}`))
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, sessionsStream: null, trust: trustRootFor([profile]) })
    expect(checkOf(r, "registry")).toMatchObject({ status: "passed", violations: [] })
    expect(r.policy_epochs).toEqual([1, 2])
  })

  it("the second admin's approval removed from the call and from the record's signatures: epoch 2 is not trusted", async () => {
    const stream = await copyStream(kernelConn, await readAll(kernelConn), (ms) =>
      ms
        .filter((m) => !(m.subject === `wk.v1.events.${heldId}` && m.body["type"] === "attestation.accepted"))
        .map((m) => {
          if (m.subject !== "wk.v1.events._policy" || m.body["epoch"] !== 2) return m
          const by = m.body["applied_by"] as { signatures: { approvals: Array<unknown> } }
          by.signatures.approvals = []
          return m
        })
    )
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, trust: trustRootFor([profile]) })
    expect(failedChecks(r)).toContain("registry")
    expect(checkOf(r, "registry").violations[0]!.message).toMatch(/^epoch 2 \(witnessed change h_\w+\) is not authorized: widening applied without a second admin/)
    expect(r.policy_epochs).toEqual([1])
  })

  it("the record's signatures stripped and the call's approval removed (the older record shape): epoch 2 is not trusted", async () => {
    const stream = await copyStream(kernelConn, await readAll(kernelConn), (ms) =>
      ms
        .filter((m) => !(m.subject === `wk.v1.events.${heldId}` && m.body["type"] === "attestation.accepted"))
        .map((m) => {
          if (m.subject !== "wk.v1.events._policy" || m.body["epoch"] !== 2) return m
          delete (m.body["applied_by"] as { signatures?: unknown }).signatures
          return m
        })
    )
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, trust: trustRootFor([profile]) })
    expect(failedChecks(r)).toContain("registry")
    expect(checkOf(r, "registry").violations[0]!.message).toMatch(/widening applied without a second admin/)
  })
})
