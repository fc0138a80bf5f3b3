import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { getAs, getJson, post, readAuth, readStream, signedAs, startGatewayHarness, transfer, type GatewayHarness } from "./GatewayHarness.js"
import { eventually } from "../support/Stream.js"

// The gateway over a real nats-server and an in-process kernel: every endpoint, its statuses,
// and the 400s that name the field.
let h: GatewayHarness
beforeAll(async () => {
  h = await startGatewayHarness()
}, 60_000)
afterAll(async () => {
  await h?.stop()
})

const attestFor = (held: Record<string, any>, witness: string, decision: string, extra: Record<string, unknown> = {}) =>
  signedAs(witness, {
    op: "attest", class: "human", held_id: held.held_id, generation: held.generation, call_digest: held.call_digest, contract_digest: held.contract_digest,
    decision, issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString(), nonce: randomBytes(12).toString("hex"), ...extra
  })

describe("HTTP gateway", () => {
  it("POST /tool-calls answers 200 for an allowed call, 202 for a held one, 403 for a denied one", async () => {
    const before = h.bank.effects
    const ok = await post(`${h.url}/tool-calls`, transfer(10))
    expect(ok.status).toBe(200)
    expect(ok.body).toMatchObject({ status: 200, outcome: "completed", admission: "admitted" })
    const held = await post(`${h.url}/tool-calls`, transfer(5000))
    expect(held.status).toBe(202)
    expect(held.body).toMatchObject({ status: 202, outcome: "held", generation: 1 })
    expect(held.body.witness_request.contract_digest).toMatch(/^[0-9a-f]{64}$/)
    const denied = await post(`${h.url}/tool-calls`, transfer(500_000))
    expect(denied.status).toBe(403)
    expect(denied.body.outcome).toBe("denied")
    expect(h.bank.effects).toBe(before + 1)
  })

  it("400s name the field; a bad signature is 401; oversized bodies are refused", async () => {
    const env = transfer(10)
    const missing = await post(`${h.url}/tool-calls`, { ...env, payload: { ...env.payload, tool: undefined } })
    expect(missing.status).toBe(400)
    expect(missing.body.error).toMatchObject({ code: "invalid_request", path: "payload.tool" })
    const notJson = await post(`${h.url}/tool-calls`, "{nope")
    expect(notJson.status).toBe(400)
    expect(notJson.body.error.code).toBe("invalid_request")
    const forged = await post(`${h.url}/tool-calls`, { ...env, payload: { ...env.payload, args: { from: "alice", to: "bob", amount: 11 } } })
    expect(forged.status).toBe(401)
    const big = await post(`${h.url}/tool-calls`, { ...env, pad: "x".repeat(1_100_000) })
    expect(big.status).toBe(400)
    expect(big.body.error.message).toMatch(/limit/)
    // Chunked (no content-length): refused all the same.
    const chunks = new ReadableStream({ start(c) { for (let i = 0; i < 12; i++) c.enqueue(new TextEncoder().encode("x".repeat(100_000))); c.close() } })
    // The gateway answers 400 and stops reading; the client may see that reply or the reset.
    const chunked = await fetch(`${h.url}/tool-calls`, { method: "POST", body: chunks, duplex: "half" } as RequestInit).then((r) => r.status, (e: Error) => String((e.cause as { code?: string } | undefined)?.code ?? e))
    expect([400, "ECONNRESET", "EPIPE"]).toContain(chunked)
    expect((await post(`${h.url}/tool-calls`, transfer(10))).status).toBe(200)
    const badId = await getAs(h.url, "user:carol", "/held/not-an-id")
    expect(badId.status).toBe(400)
    expect(badId.body.error.path).toBe("held_id")
    const unknown = await getAs(h.url, "user:carol", `/held/h_${"0".repeat(32)}`)
    expect(unknown.status).toBe(404)
  })

  it("GET /held lists the call for its witness class, attestations and cancel go through, and the path must match the payload", async () => {
    const held = (await post(`${h.url}/tool-calls`, transfer(2500))).body
    const view = (await getAs(h.url, "user:carol", `/held/${held.held_id}`)).body.held
    expect(view).toMatchObject({ held_id: held.held_id, lifecycle: "open", readiness: "unsatisfied", execution: "none" })
    const forCarol = await getAs(h.url, "user:carol", "/held")
    expect(forCarol.status).toBe(200)
    expect(forCarol.body.held.filter((x: any) => x.held_id === held.held_id).map((x: any) => x.view)).toEqual(["witness"])
    const forFraud = await getAs(h.url, "svc:fraud", "/held")
    expect(forFraud.body.held.map((x: any) => x.held_id)).not.toContain(held.held_id)
    // The proposer lists its own call as its proposer, never as a witness.
    const forAlice = await getAs(h.url, "agent:alice", "/held")
    expect(forAlice.body.held.filter((x: any) => x.held_id === held.held_id).map((x: any) => x.view)).toEqual(["proposer"])

    const other = (await post(`${h.url}/tool-calls`, transfer(2600))).body
    const mismatch = await post(`${h.url}/held/${other.held_id}/attestations`, attestFor(view, "user:carol", "approve"))
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.path).toBe("payload.held_id")
    const wrongDecision = await post(`${h.url}/held/${view.held_id}/attestations`, attestFor(view, "user:carol", "maybe"))
    expect(wrongDecision.status).toBe(400)
    expect(wrongDecision.body.error.path).toBe("payload.decision")

    const before = h.bank.effects
    const approve = attestFor(view, "user:carol", "approve")
    const accepted = await post(`${h.url}/held/${view.held_id}/attestations`, approve)
    expect(accepted).toMatchObject({ status: 202, body: { disposition: "accepted" } })
    const again = await post(`${h.url}/held/${view.held_id}/attestations`, approve)
    expect(again).toMatchObject({ status: 200, body: { disposition: "duplicate" } })
    await eventually(async () => (await getAs(h.url, "agent:alice", `/held/${view.held_id}`)).body.held.lifecycle === "completed")
    expect(h.bank.effects).toBe(before + 1)
    const late = await post(`${h.url}/held/${view.held_id}/cancel`, signedAs("agent:alice", { op: "cancel", held_id: view.held_id, reason: "too late" }))
    expect(late.status).toBe(409)

    const cancelled = await post(`${h.url}/held/${other.held_id}/cancel`, signedAs("agent:alice", { op: "cancel", held_id: other.held_id, reason: "changed my mind" }))
    expect(cancelled).toMatchObject({ status: 200, body: { lifecycle: "cancelled" } })
    const twice = await post(`${h.url}/held/${other.held_id}/cancel`, signedAs("agent:alice", { op: "cancel", held_id: other.held_id, reason: "changed my mind" }))
    expect(twice.status).toBe(200)
  })

  it("GET /held/{id}/events streams the call's events as server-sent events to a signed reader", async () => {
    const held = (await post(`${h.url}/tool-calls`, transfer(3000))).body
    const path = `/held/${held.held_id}/events`
    const r = await fetch(h.url + path, { headers: { authorization: readAuth("user:dave", "GET", path) } })
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/text\/event-stream/)
    const streamed = readStream(r, (text) => text.includes('"type":"delivery.published"'))
    const view = (await getAs(h.url, "user:dave", `/held/${held.held_id}`)).body.held
    expect((await post(`${h.url}/held/${held.held_id}/attestations`, attestFor(view, "user:dave", "approve"))).status).toBe(202)
    const text = await streamed
    const types = [...text.matchAll(/"type":"([a-z_.]+)"/g)].map((m) => m[1])
    for (const t of ["call.proposed", "call.adjudicated", "call.held", "attestation.accepted", "readiness.changed", "effect.dispatched", "effect.recorded", "result.admitted", "delivery.published"]) expect(types).toContain(t)
  })

  it("serves the OpenAPI document and the inbox", async () => {
    const doc = await getJson(`${h.url}/openapi.json`)
    expect(doc.status).toBe(200)
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(["/tool-calls", "/held/{held_id}", "/held/{held_id}/attestations", "/held/{held_id}/cancel", "/held/{held_id}/events", "/held"]))
    const page = await fetch(`${h.url}/inbox/`)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("approval inbox")
    const keys = await fetch(`${h.url}/inbox/keys.js`)
    expect(keys.status).toBe(200)
    expect((await getJson(`${h.url}/nope`)).status).toBe(404)
  })
})
