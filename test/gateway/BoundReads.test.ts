import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { HttpServer } from "@effect/platform"
import { Effect, ManagedRuntime } from "effect"
import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import nacl from "tweetnacl"
import { layerGateway } from "../../runtime/gateway/Gateway.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { clientFor, connectAs } from "../support/Principals.js"
import { eventually } from "../support/Stream.js"
import { Roles } from "../support/TestNats.js"
import { post, readAuth, signedAs, startGatewayHarness, transfer, type GatewayHarness } from "./GatewayHarness.js"

// Reads are bound and cost before trust, tried as an attacker would: a captured gateway read
// header replayed over NATS for another call or at another gateway; an unsigned held.get from the
// agent login; an outsider's self-signed listing against a kernel with many open calls.
let h: GatewayHarness
let agentConn: NatsConnection
let witnessConn: NatsConnection
let second: ManagedRuntime.ManagedRuntime<HttpServer.HttpServer, unknown>
let secondUrl: string

beforeAll(async () => {
  h = await startGatewayHarness()
  agentConn = await connectAs(h.nats.servers, "agent")
  witnessConn = await connectAs(h.nats.servers, "witness")
  // A second gateway on the same NATS: replays must not work across gateways either.
  second = ManagedRuntime.make(layerGateway({ nats: { servers: h.nats.servers, ...Roles.gateway }, port: 0 }))
  const address = await second.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
  if (address._tag !== "TcpAddress") throw new Error("gateway is not on TCP")
  secondUrl = `http://127.0.0.1:${address.port}`
}, 60_000)
afterAll(async () => {
  await second?.dispose()
  await Promise.all([agentConn?.close(), witnessConn?.close()])
  await h?.stop()
})

const heldTransfer = async (amount: number) => {
  const r = await post(`${h.url}/tool-calls`, transfer(amount, "s-bound"))
  expect(r.status).toBe(202)
  return String(r.body["held_id"])
}
const envelopeOf = (header: string): Envelope => JSON.parse(Buffer.from(header.slice("WK-Read ".length), "base64").toString("utf8")) as Envelope
const overNats = async (nc: NatsConnection, subject: string, body: unknown) => (await nc.request(subject, JSON.stringify(body), { timeout: 5_000 })).json<{ status: number; view?: string; held?: Record<string, unknown>; error?: { message: string } }>()
const getWith = async (base: string, path: string, authorization: string) => {
  const r = await fetch(base + path, { headers: { authorization } })
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}

/** Counts the requests on `subjects` that the kernel's login sees (every subscriber gets each one). */
const countRequests = (subjects: ReadonlyArray<string>) => {
  const seen = new Map<string, number>(subjects.map((s) => [s, 0]))
  const subs: Array<Subscription> = subjects.map((s) => h.kernelConn.subscribe(s, { callback: () => void seen.set(s, seen.get(s)! + 1) }))
  return {
    /** The counts once every request published before now has reached this subscriber. */
    settled: async () => {
      await h.kernelConn.flush()
      return Object.fromEntries(seen)
    },
    stop: () => subs.forEach((s) => s.unsubscribe())
  }
}

describe("signed reads name their operation and target, and are good once", () => {
  it("a gateway header for one call, used once, is refused over NATS for another call, for the same call again, and at another gateway", async () => {
    const a = await heldTransfer(2_100)
    const b = await heldTransfer(2_200)
    const header = readAuth("user:carol", "GET", `/held/${a}`)
    expect((await getWith(h.url, `/held/${a}`, header)).status).toBe(200)
    const captured = envelopeOf(header)
    // Replayed by another login over NATS, for another call: it names /held/<a>, not b.
    const other = await overNats(agentConn, Subjects.get, { held_id: b, reader: captured })
    expect(other.status).toBe(401)
    expect(other.error?.message).toContain(`held.get of ${a}, not held.get of ${b}`)
    // For the same call: its nonce was used.
    const again = await overNats(agentConn, Subjects.get, { held_id: a, reader: captured })
    expect(again.status).toBe(401)
    expect(again.error?.message).toContain("nonce was used before")
    // At another gateway, whose own memory never saw it: the kernels' shared record refuses it.
    const elsewhere = await getWith(secondUrl, `/held/${a}`, header)
    expect(elsewhere.status).toBe(401)
    expect(elsewhere.body.error.message).toContain("nonce was used before")
    // As a listing or a standing read: the header names one call.
    expect((await overNats(agentConn, Subjects.standingList, { reader: captured })).status).toBe(401)
  })

  it("a read over NATS names its subject and call: one for another subject, one naming nothing, and one used twice are refused", async () => {
    const a = await heldTransfer(2_300)
    const read = (payload: Record<string, unknown>) => signedAs("user:carol", { op: "read", issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex"), ...payload })
    const good = read({ path: Subjects.get, held_id: a })
    expect(await overNats(agentConn, Subjects.get, { held_id: a, reader: good })).toMatchObject({ status: 200, view: "witness" })
    expect((await overNats(agentConn, Subjects.get, { held_id: a, reader: good })).status).toBe(401)
    expect((await overNats(agentConn, Subjects.get, { held_id: a, reader: read({}) })).error?.message).toContain("names its operation")
    expect((await overNats(agentConn, Subjects.get, { held_id: a, reader: read({ path: Subjects.standingList }) })).error?.message).toContain("standing.list, not held.get")
    expect((await overNats(agentConn, Subjects.get, { held_id: a, reader: read({ path: Subjects.get }) })).error?.message).toContain("names its call")
  })
})

describe("an unsigned held.get from the agent login", () => {
  it("answers the agent view, never the witness view: no arguments, presentation, contract or evidence; a signed read gives the proposer its own call and nobody else's", async () => {
    const a = await heldTransfer(2_400)
    const unsigned = await overNats(agentConn, Subjects.get, { held_id: a })
    expect(unsigned).toMatchObject({ status: 200, view: "agent", held: { held_id: a, lifecycle: "open", generation: 1 } })
    for (const field of ["args", "witness_request", "witness_contract", "evidence", "proposed", "reasons", "principal"]) expect(unsigned.held).not.toHaveProperty(field)
    expect(JSON.stringify(unsigned)).not.toContain("2400")
    // Signed by the proposer: its own call, arguments included.
    expect(await clientFor(agentConn, "agent:alice").get(a)).toMatchObject({ status: 200, view: "proposer", held: { args: { amount: 2_400 } } })
    // Signed by another agent over the same login: none of its business.
    expect((await clientFor(agentConn, "agent:bob").get(a)).status).toBe(404)
    // The witness login still reads the witness view, unsigned.
    expect(await overNats(witnessConn, Subjects.get, { held_id: a })).toMatchObject({ status: 200, view: "witness", held: { args: { amount: 2_400 } } })
  })
})

describe("cost before trust on the gateway", () => {
  it("an outsider's self-signed GET /held, with 30 calls open, is refused before any call is read: the kernel sees one list request and no held.get", async () => {
    for (let i = 0; i < 30; i++) await heldTransfer(3_000 + i)
    const outsider = nacl.sign.keyPair()
    const path = "/held"
    const env = signEnvelope({ op: "read", principal: "user:carol", method: "GET", path, issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") }, outsider.secretKey)
    const counts = countRequests([Subjects.get, Subjects.heldList])
    try {
      const r = await getWith(h.url, path, `WK-Read ${Buffer.from(JSON.stringify(env)).toString("base64")}`)
      expect(r.status).toBe(401)
      expect(r.body.error.message).toContain("key is not registered")
      expect(await eventually(async () => { const c = await counts.settled(); return c[Subjects.heldList] === 1 ? c : undefined })).toEqual({ [Subjects.get]: 0, [Subjects.heldList]: 1 })
      // The witness's own listing: the same one request, every call read inside the kernel.
      const listed = await getWith(h.url, path, readAuth("user:carol", "GET", path))
      expect(listed.status).toBe(200)
      expect(listed.body.held.length).toBeGreaterThanOrEqual(30)
      expect(listed.body.held.every((c: { view: string }) => c.view === "witness")).toBe(true)
      expect(await eventually(async () => { const c = await counts.settled(); return c[Subjects.heldList] === 2 ? c : undefined })).toEqual({ [Subjects.get]: 0, [Subjects.heldList]: 2 })
    } finally {
      counts.stop()
    }
  })
})
