import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import type { NatsConnection } from "@nats-io/transport-node"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { EchoTool } from "../support/EchoTool.js"
import { connectAs } from "../support/Principals.js"
import { eventually } from "../support/Stream.js"
import { gatewayProfile, getAs, post, signedAs, startGatewayHarness, type GatewayHarness } from "./GatewayHarness.js"

// Witness features over the HTTP gateway, with bodies signed as a client written from
// docs/gateway.md would sign them: edit on approve, batch approval, extensions, evidence terms
// and peer adjudication; and what each refuses to someone who only has the gateway.
const entry = (name: string, classes: Array<string>, namespace?: string) => [name, { keys: [devPublicKey(name)], classes, ...(namespace !== undefined ? { namespace } : {}) }] as const
const base = gatewayProfile()
const profile: Profile = {
  ...base,
  principals: { ...base.principals, ...Object.fromEntries([entry("agent:alice", ["agent"], "alice"), entry("svc:ci", ["ci"]), entry("agent:alice-reviewer", ["peer"], "alice"), entry("agent:bob-reviewer", ["peer"], "bob")]) },
  grants: { ...base.grants, "agent:alice": [...(base.grants?.["agent:alice"] ?? []), "deploy", "merge_pr"] },
  rules: {
    ...base.rules,
    deploy: { always_witness: true, contract: { rule: { class: "human" }, evidence: [{ name: "ci", kind: "ci-status", by: { class: "ci" }, expect: { commit: "{args.commit}", check: "build", conclusion: "success" } }] } },
    merge_pr: { always_witness: true, contract: { rule: { class: "peer" } } }
  }
}

let h: GatewayHarness
let echoConn: NatsConnection
let echo: EchoTool
const soon = (ms: number) => new Date(Date.now() + ms).toISOString()
const fresh = () => ({ issued_at: new Date().toISOString(), expires_at: soon(600_000), nonce: randomBytes(12).toString("hex") })
let n = 0
const propose = async (tool: string, args: Record<string, unknown>, preferences?: Record<string, unknown>) => {
  const r = await post(`${h.url}/tool-calls`, signedAs("agent:alice", { op: "propose", session_id: "s-gw-features", turn_id: "t1", call_id: `f${++n}`, tool, args, ...(preferences ? { preferences } : {}), nonce: randomBytes(12).toString("hex"), expires_at: soon(300_000) }))
  expect(r.status, JSON.stringify(r.body)).toBe(202)
  return String(r.body["held_id"])
}
type Held = { held_id: string; generation: number; call_digest: string; contract_digest: string; lifecycle: string; expires_at: string; args?: Record<string, unknown>; evidence: Array<Record<string, unknown>> }
const read = async (id: string, as = "agent:alice") => (await getAs(h.url, as, `/held/${id}`)).body["held"] as Held
const binding = (x: Held) => ({ held_id: x.held_id, generation: x.generation, call_digest: x.call_digest, contract_digest: x.contract_digest })
const attest = async (id: string, witness: string, klass: string, decision: string, extra: Record<string, unknown> = {}, bound?: Held) =>
  post(`${h.url}/held/${id}/attestations`, signedAs(witness, { op: "attest", class: klass, ...binding(bound ?? (await read(id))), decision, ...fresh(), ...extra }))
const transfer = (amount: number) => propose("money_transfer", { from: "alice", to: "bob", amount })

beforeAll(async () => {
  h = await startGatewayHarness(profile)
  echoConn = await connectAs(h.nats.servers, "echo")
  echo = new EchoTool(["deploy", "merge_pr"]).serve(echoConn)
}, 60_000)

afterAll(async () => {
  await echoConn?.close()
  await h?.stop()
})

describe("edit on approve over the gateway", () => {
  it("a witness's signed edit is a new generation; an approval of the edited digest runs the edited call once", async () => {
    const id = await transfer(2_500)
    const g1 = await read(id)
    const edit = await post(`${h.url}/held/${id}/edits`, signedAs("user:carol", { op: "edit", class: "human", ...binding(g1), args: { from: "alice", to: "bob", amount: 1_500 }, reason: "cap it", ...fresh() }))
    expect(edit).toMatchObject({ status: 202, body: { disposition: "accepted", generation: 2 } })
    // The old generation's approval no longer counts.
    expect((await attest(id, "user:dave", "human", "approve", {}, g1)).status).toBe(409)
    const before = h.bank.effects
    expect((await attest(id, "user:dave", "human", "approve")).status).toBe(202)
    await eventually(async () => (await read(id)).lifecycle === "completed")
    expect(h.bank.effects).toBe(before + 1)
    expect((await read(id)).generation).toBe(2)
  })

  it("the proposer cannot edit its own call; an unsigned edit is 401", async () => {
    const id = await transfer(2_600)
    const g1 = await read(id)
    expect((await post(`${h.url}/held/${id}/edits`, signedAs("agent:alice", { op: "edit", class: "agent", ...binding(g1), args: { from: "alice", to: "bob", amount: 10 }, ...fresh() }))).status).toBe(422)
    const body = signedAs("user:carol", { op: "edit", class: "human", ...binding(g1), args: { from: "alice", to: "bob", amount: 10 }, ...fresh() })
    expect((await post(`${h.url}/held/${id}/edits`, { payload: body.payload })).status).toBe(401)
    expect((await read(id)).generation).toBe(1)
  })
})

describe("batch approval over the gateway", () => {
  it("one signed batch releases three calls once each; the same body again runs nothing more", async () => {
    const ids = [await transfer(1_100), await transfer(1_200), await transfer(1_300)]
    const items = await Promise.all(ids.map(async (id) => binding(await read(id))))
    const body = signedAs("user:carol", { op: "attest_batch", class: "human", decision: "approve", mode: "all", items, ...fresh() })
    const before = h.bank.effects
    const r = await post(`${h.url}/attestations/batch`, body)
    expect(r).toMatchObject({ status: 200, body: { disposition: "recorded" } })
    await eventually(async () => h.bank.effects === before + 3)
    const again = await post(`${h.url}/attestations/batch`, body)
    expect(again.status).toBeLessThan(500)
    for (const id of ids) expect((await read(id)).lifecycle).toBe("completed")
    expect(h.bank.effects).toBe(before + 3)
  })

  it("mode all with one call cancelled meanwhile refuses the whole batch", async () => {
    const ids = [await transfer(1_400), await transfer(1_500)]
    const items = await Promise.all(ids.map(async (id) => binding(await read(id))))
    expect((await post(`${h.url}/held/${ids[1]}/cancel`, signedAs("agent:alice", { op: "cancel", held_id: ids[1], reason: "no" }))).status).toBe(200)
    const r = await post(`${h.url}/attestations/batch`, signedAs("user:carol", { op: "attest_batch", class: "human", decision: "approve", mode: "all", items, ...fresh() }))
    expect(r).toMatchObject({ status: 409, body: { disposition: "refused" } })
    expect((await read(ids[0]!)).lifecycle).toBe("open")
  })
})

describe("extensions over the gateway", () => {
  it("a contract witness moves the expiry later; the proposer cannot", async () => {
    // The agent asked for a ten-minute hold; a witness needs longer.
    const id = await propose("money_transfer", { from: "alice", to: "bob", amount: 2_700 }, { expires_in_ms: 600_000 })
    const x = await read(id)
    const to = new Date(Date.parse(x.expires_at) + 1_200_000).toISOString()
    expect((await post(`${h.url}/held/${id}/extensions`, signedAs("agent:alice", { op: "extend", class: "agent", ...binding(x), extend_to: to, ...fresh() }))).status).toBe(422)
    const r = await post(`${h.url}/held/${id}/extensions`, signedAs("user:dave", { op: "extend", class: "human", ...binding(x), extend_to: to, reason: "back on Monday", ...fresh() }))
    expect(r, JSON.stringify(r.body)).toMatchObject({ status: 202, body: { disposition: "accepted", expires_at: to } })
    expect((await read(id)).expires_at).toBe(to)
  })
})

describe("evidence terms over the gateway", () => {
  it("a human's approval is not enough until CI's signed status for the call's own commit arrives", async () => {
    const id = await propose("deploy", { service: "api", commit: "c0ffee" })
    expect((await attest(id, "user:carol", "human", "approve")).status).toBe(202)
    expect((await attest(id, "svc:ci", "ci", "evidence", { evidence: { term: "ci", kind: "ci-status", read: { commit: "deadbeef", check: "build", conclusion: "success" } } })).status).toBe(202)
    expect((await read(id)).lifecycle).toBe("open")
    // A human cannot supply CI's evidence.
    expect((await attest(id, "user:dave", "human", "evidence", { evidence: { term: "ci", kind: "ci-status", read: { commit: "c0ffee", check: "build", conclusion: "success" } } })).status).toBe(422)
    expect((await attest(id, "svc:ci", "ci", "evidence", { evidence: { term: "ci", kind: "ci-status", read: { commit: "c0ffee", check: "build", conclusion: "success" } } })).status).toBe(202)
    await eventually(async () => (await read(id)).lifecycle === "completed", 10_000).catch(async (e) => {
      throw new Error(`${String(e)}: ${JSON.stringify(await read(id))}`)
    })
    expect([...echo.invocations.values()].reduce((a, b) => a + b, 0)).toBe(1)
  })
})

describe("peer adjudication over the gateway", () => {
  it("a reviewer in the proposer's session namespace is refused; one of another namespace releases the call", async () => {
    const id = await propose("merge_pr", { pr: 42 })
    const same = await attest(id, "agent:alice-reviewer", "peer", "approve")
    expect(same.status).toBe(422)
    expect(String(same.body["reason"])).toContain("namespace")
    expect((await attest(id, "agent:bob-reviewer", "peer", "approve")).status).toBe(202)
    await eventually(async () => (await read(id)).lifecycle === "completed")
  })
})
