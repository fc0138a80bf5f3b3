import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { WitnessClient } from "../../runtime/client/Client.js"
import { startKernel } from "../support/InProcessKernel.js"
import { clientFor, connectAs } from "../support/Principals.js"
import { startTestNats } from "../support/TestNats.js"
import { eventually } from "../support/Stream.js"
import { fresh, gatewayProfile, getAs, getJson, LeakedToken, post, readAuth, readStream, signedAs, startGatewayHarness, transfer, type GatewayHarness } from "./GatewayHarness.js"

// The gateway's reads against an attacker: who may read what, through which view. Each test uses
// only what the attacker has: no key, another principal's key, a captured header, the witness's
// NATS login.
let h: GatewayHarness
beforeAll(async () => {
  h = await startGatewayHarness()
}, 60_000)
afterAll(async () => {
  await h?.stop()
})

let n = 0
const vault = (tool: "vault_read" | "vault_fail") =>
  signedAs("agent:alice", { op: "propose", session_id: "s-leak", turn_id: "t1", call_id: `leak${Date.now()}-${++n}`, tool, args: { path: "db/creds" }, ...fresh() })

describe("quarantined bytes reach nobody but the auditor", () => {
  it("the event stream refuses a reader without credentials, and the proposer's stream never carries the quarantined result", async () => {
    const reply = await post(`${h.url}/tool-calls`, vault("vault_read"))
    expect(reply.body).toMatchObject({ status: 200, admission: "quarantined", result: null })
    const path = `/held/${reply.body.held_id}/events`
    const anonymous = await fetch(h.url + path)
    expect(anonymous.status).toBe(401)
    await anonymous.body?.cancel()

    const r = await fetch(h.url + path, { headers: { authorization: readAuth("agent:alice", "GET", path) } })
    expect(r.status).toBe(200)
    const text = await readStream(r, (t) => t.includes('"type":"result.quarantined"'))
    // The effect and its quarantine are on the stream; the bytes admission refused are not.
    expect(text).toContain('"type":"effect.recorded"')
    expect(text).toContain('"type":"result.quarantined"')
    expect(text).not.toContain(LeakedToken)
    const view = await getAs(h.url, "agent:alice", `/held/${reply.body.held_id}`)
    expect(view.status).toBe(200)
    expect(JSON.stringify(view.body)).not.toContain(LeakedToken)
  })

  it("a quarantined tool error never reaches the propose reply", async () => {
    const reply = await post(`${h.url}/tool-calls`, vault("vault_fail"))
    expect(reply.body).toMatchObject({ status: 200, outcome: "tool_failed", admission: "quarantined", ok: false, result: null })
    expect(reply.body.quarantine.by).toBe("plugin:secret-detect@1.0.0")
    expect(JSON.stringify(reply.body)).not.toContain(LeakedToken)
    // Proposed again (idempotent): the same answer, still without the bytes.
    expect(JSON.stringify((await post(`${h.url}/tool-calls`, vault("vault_fail"))).body)).not.toContain(LeakedToken)
  })
})

describe("every read is signed and scoped to the reader", () => {
  it("an unauthenticated read is refused, and another principal cannot read or list your call", async () => {
    const held = (await post(`${h.url}/tool-calls`, transfer(2100))).body
    expect(held.status).toBe(202)
    for (const path of [`/held/${held.held_id}`, "/held", "/held?class=human", "/held?principal=user:carol&class=human"]) {
      const r = await getJson(h.url + path)
      expect(r.status, path).toBe(401)
      expect(r.body.error.code).toBe("unauthenticated")
      expect(JSON.stringify(r.body)).not.toContain(held.held_id)
    }
    // agent:bob is registered, but neither proposed the call nor may witness it.
    const bob = await getAs(h.url, "agent:bob", `/held/${held.held_id}`)
    expect(bob.status).toBe(404)
    expect(JSON.stringify(bob.body)).not.toContain("2100")
    expect((await getAs(h.url, "agent:bob", "/held")).body.held.map((x: any) => x.held_id)).not.toContain(held.held_id)
    const events = `/held/${held.held_id}/events`
    expect((await fetch(h.url + events, { headers: { authorization: readAuth("agent:bob", "GET", events) } })).status).toBe(404)
    // A key that is not registered to the principal it claims is no better than none.
    const forged = { ...signedAs("agent:mallory", { op: "read", method: "GET", path: `/held/${held.held_id}`, issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") }) }
    const claimed = { ...forged, payload: { ...forged.payload, principal: "agent:alice" } }
    const asAlice = await fetch(`${h.url}/held/${held.held_id}`, { headers: { authorization: `WK-Read ${Buffer.from(JSON.stringify(claimed)).toString("base64")}` } })
    expect(asAlice.status).toBe(401)
    // The proposer and an eligible witness do read it.
    expect((await getAs(h.url, "agent:alice", `/held/${held.held_id}`)).body).toMatchObject({ status: 200, view: "proposer", held: { args: { amount: 2100 } } })
    expect((await getAs(h.url, "user:carol", `/held/${held.held_id}`)).body).toMatchObject({ status: 200, view: "witness" })
  })

  it("a captured read header is good once: replayed, re-pathed or stale it is refused", async () => {
    const held = (await post(`${h.url}/tool-calls`, transfer(2200))).body
    const path = `/held/${held.held_id}`
    const header = readAuth("user:carol", "GET", path)
    expect((await fetch(h.url + path, { headers: { authorization: header } })).status).toBe(200)
    const replayed = await fetch(h.url + path, { headers: { authorization: header } })
    expect(replayed.status).toBe(401)
    expect(((await replayed.json()) as any).error.message).toMatch(/replayed/)
    const other = (await post(`${h.url}/tool-calls`, transfer(2300))).body
    expect((await fetch(`${h.url}/held/${other.held_id}`, { headers: { authorization: readAuth("user:carol", "GET", path) } })).status).toBe(401)
    const stale = readAuth("user:carol", "GET", path, { issuedAt: new Date(Date.now() - 10 * 60_000).toISOString() })
    expect((await fetch(h.url + path, { headers: { authorization: stale } })).status).toBe(401)
  })
})

describe("disclosure governs every witness-facing view", () => {
  it("a redacted call shows a witness neither its arguments nor its result: gateway view, listing, stream and NATS held.get", async () => {
    const amount = 7741
    const held = (await post(`${h.url}/tool-calls`, transfer(amount, "s-gw", { disclosure: "redacted" }))).body
    expect(held.status).toBe(202)
    const id = held.held_id as string
    const asWitness = await getAs(h.url, "user:carol", `/held/${id}`)
    expect(asWitness.body).toMatchObject({ status: 200, view: "witness", held: { args: { amount: "[redacted number]" }, proposed: { args: { amount: "[redacted number]" } } } })
    const listed = (await getAs(h.url, "user:carol", "/held")).body.held.find((x: any) => x.held_id === id)
    expect(listed).toBeDefined()
    expect(JSON.stringify(listed)).not.toContain(String(amount))
    const witnessConn = await connectAs(h.nats.servers, "witness")
    try {
      const overNats = await clientFor(witnessConn, "user:carol").get(id)
      expect(overNats.status).toBe(200)
      expect(JSON.stringify(overNats.held)).not.toContain(String(amount))

      // Approved and run: the result stays hidden from witnesses, the proposer sees it.
      const path = `/held/${id}/events`
      const stream = await fetch(h.url + path, { headers: { authorization: readAuth("user:dave", "GET", path) } })
      const streamed = readStream(stream, (t) => t.includes('"type":"delivery.published"'))
      const v = asWitness.body.held
      const attest = signedAs("user:dave", { op: "attest", class: "human", held_id: id, generation: v.generation, call_digest: v.call_digest, contract_digest: v.contract_digest, decision: "approve", issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString(), nonce: randomBytes(12).toString("hex") })
      expect((await post(`${h.url}/held/${id}/attestations`, attest)).status).toBe(202)
      const text = await streamed
      expect(text).toContain('"type":"result.admitted"')
      expect(text).not.toContain(String(amount))
      const done = await eventually(async () => {
        const r = (await getAs(h.url, "user:dave", `/held/${id}`)).body
        return r.held?.lifecycle === "completed" ? r : null
      })
      expect(done.held.result_admission).toBe("admitted")
      expect(JSON.stringify(done)).not.toContain(String(amount))
      expect(JSON.stringify((await clientFor(witnessConn, "user:carol").get(id)).held)).not.toContain(String(amount))
      expect(JSON.stringify((await getAs(h.url, "agent:alice", `/held/${id}`)).body.held.result)).toContain(String(amount))
    } finally {
      await witnessConn.close()
    }
  })
})

describe("held ids", () => {
  it("the same call gets another id under another kernel's secret, and the same id when proposed again", async () => {
    // Each envelope is fresh (its own nonce); the call's names are the same.
    const propose = () => signedAs("agent:alice", { op: "propose", session_id: "s-ids", turn_id: "t1", call_id: "same-call", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 5000 }, ...fresh() })
    const first = (await post(`${h.url}/tool-calls`, propose())).body
    const again = (await post(`${h.url}/tool-calls`, propose())).body
    expect(first.held_id).toMatch(/^h_[0-9a-f]{32}$/)
    expect(again.held_id).toBe(first.held_id)
    // A second deployment (its own nats-server, so its own secret) derives another id.
    const nats = await startTestNats()
    const kernel = await startKernel(nats.servers, [gatewayProfile()])
    const agent = await connectAs(nats.servers, "agent")
    try {
      const elsewhere = await WitnessClient.over(agent, { principal: "agent:alice", secretKey: new Uint8Array(64) }).request<{ held_id: string }>("wk.v1.calls.propose", propose())
      expect(elsewhere.held_id).toMatch(/^h_[0-9a-f]{32}$/)
      expect(elsewhere.held_id).not.toBe(first.held_id)
    } finally {
      await agent.close()
      await kernel.stop()
      await nats.dispose()
    }
  }, 60_000)
})
