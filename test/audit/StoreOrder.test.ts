import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, copyStream, forgedApproval, readAll, replayAs, trustRootFor, type CopiedMessage } from "./support.js"

// Time from the store's order: a witness key removed by a policy change, then an approval signed
// with it and dated before the change, written after it by someone holding the kernel's NATS
// credentials (here: a copy of the real history with it appended). The registry that judges a
// signed request is the one in force where it is stored, so the approval is named as backdated;
// the same approval stored where it claims to be is judged under the epoch that registered it.

let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
const profile = testProfile()
const withoutCarol = { ...profile, principals: Object.fromEntries(Object.entries(profile.principals ?? {}).filter(([p]) => p !== "user:carol")) }
type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const bindingOf = (h: Held) => ({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })
let held: Held
let history: Array<CopiedMessage & { seq: number; index: number }>

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [tool, agent, witness, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness"), connectAs(nats.servers, "kernel")])
  conns = [tool, agent, witness, k]
  kernelConn = k
  new DemoBank().serve(tool)
  const alice = clientFor(agent, "agent:alice")
  const carol = clientFor(witness, "user:carol")
  // An approval by carol under epoch 1 (the forger's template), then a call left waiting.
  const first = (await alice.propose({ session_id: "s-order", turn_id: "t1", call_id: "o1", tool: "money_transfer", args: { from: "a", to: "shop", amount: 5000 } } as never)) as Held
  expect((await carol.attest({ ...bindingOf(first), class: "human", decision: "approve" })).disposition).toBe("accepted")
  held = (await alice.propose({ session_id: "s-order", turn_id: "t1", call_id: "o2", tool: "money_transfer", args: { from: "b", to: "shop", amount: 6000 } } as never)) as Held
  expect(held.status).toBe(202)
  // Epoch 2 removes carol (a narrowing: applied at once); her approval no longer counts.
  expect((await clientFor(k, "admin:root").applyPolicy(withoutCarol as never)).status).toBe(200)
  await eventually(async () => ((await alice.get(held.held_id)).held as Record<string, unknown>)["policy_epoch_checked"] === 2)
  expect((await carol.attest({ ...bindingOf(held), class: "human", decision: "approve" })).disposition).not.toBe("accepted")
  history = await readAll(kernelConn)
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

/** Carol's approval of the waiting call, signed with her removed key, claiming a time before epoch 2's record. */
const backdated = () => {
  const template = history.find((m) => m.body["type"] === "attestation.accepted")!
  const record = history.find((m) => m.subject.endsWith("._policy") && m.body["epoch"] === 2)!
  const claimed = new Date(Date.parse(String(record.body["at"])) - 2_000)
  return { record, approval: forgedApproval(template.body, bindingOf(held), "user:carol", devKeyPair("user:carol").secretKey, claimed) }
}
const subjectOf = (heldId: string) => `wk.v1.events.${heldId}`
const replayCopy = (stream: string) => replayAs(nats.servers, "kernel", { stream, factsBucket: null, sessionsStream: null, trust: trustRootFor([profile]) })

describe("a signed request is judged by the registry in force where it is stored", () => {
  it("the real history passes signatures and attestation-binding", async () => {
    const r = await replayCopy(await copyStream(kernelConn, history))
    expect(checkOf(r, "signatures").violations).toEqual([])
    expect(checkOf(r, "attestation-binding").violations).toEqual([])
  })

  it("an approval with a removed key, dated before its removal but stored after it -> backdated, in signatures and attestation-binding", async () => {
    const { approval } = backdated()
    const r = await replayCopy(await copyStream(kernelConn, history, (ms) => [...ms, { subject: subjectOf(held.held_id), body: approval, commit: "forged" }]))
    const signatures = checkOf(r, "signatures").violations.map((v) => v.message)
    const binding = checkOf(r, "attestation-binding").violations.map((v) => v.message)
    expect(signatures).toEqual([expect.stringMatching(/^backdated: attestation\.accepted claims .* registered to user:carol \(epoch 1\), but it is stored at seq \d+, where epoch 2 is in force/)])
    expect(binding).toEqual([expect.stringMatching(/^backdated approval: user:carol's approval claims .* under epoch 1, but it is stored at seq \d+, where epoch 2 is in force/)])
  })

  it("the same approval stored before the removal, where it claims to be, is judged under epoch 1: no signature or binding violation", async () => {
    const { record, approval } = backdated()
    const at = history.indexOf(record)
    const r = await replayCopy(await copyStream(kernelConn, history, (ms) => [...ms.slice(0, at), { subject: subjectOf(held.held_id), body: approval, commit: "forged" }, ...ms.slice(at)]))
    expect(checkOf(r, "signatures").violations).toEqual([])
    expect(checkOf(r, "attestation-binding").violations.filter((v) => /backdated|acceptance rule/.test(v.message))).toEqual([])
  })
})
