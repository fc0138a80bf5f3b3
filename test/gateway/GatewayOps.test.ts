import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { getAs, post, readAuth, startGatewayHarness, transfer, type GatewayHarness } from "./GatewayHarness.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import nacl from "tweetnacl"
import { randomBytes } from "node:crypto"
import { eventually } from "../support/Stream.js"

// The gateway's operator endpoints: health, readiness and Prometheus metrics; with NATS gone it
// says so at once (readiness 503, requests 503 naming NATS) instead of waiting out a timeout.
let h: GatewayHarness
beforeAll(async () => {
  h = await startGatewayHarness()
}, 60_000)
afterAll(async () => {
  await h?.stop()
})

const get = async (path: string, at = h.url) => {
  const r = await fetch(`${at}${path}`)
  return { status: r.status, type: r.headers.get("content-type") ?? "", text: await r.text() }
}
const sample = (text: string, name: string, labels: string): number => {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}

describe("the gateway's operator endpoints", () => {
  it("/kernels shows every kernel's health to a signed reader, and nothing to anyone else", async () => {
    const r = await getAs(h.url, "user:carol", "/kernels")
    expect(r.status).toBe(200)
    expect(r.body["kernels"]).toEqual([
      expect.objectContaining({ owner: expect.any(String), version: expect.any(String), policy_epoch: 1, uptime_ms: expect.any(Number), controller_lag: expect.any(Number) })
    ])
    expect(r.body["kernels"][0]).not.toHaveProperty("pid")
    // No signature: refused at the edge.
    expect((await getAs(h.url, null, "/kernels")).status).toBe(401)
    // A well-formed read signed by a key nobody registered for the principal: the kernels refuse it.
    const stranger = nacl.sign.keyPair()
    const payload = { op: "read", principal: "user:carol", method: "GET", path: "/kernels", issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") }
    const forged = await fetch(`${h.url}/kernels`, { headers: { authorization: `WK-Read ${Buffer.from(JSON.stringify(signEnvelope(payload, stranger.secretKey))).toString("base64")}` } })
    expect(forged.status).toBe(401)
    expect(JSON.stringify(await forged.json())).not.toContain("version")
    // A read signed for another path does not open this one.
    expect((await fetch(`${h.url}/kernels`, { headers: { authorization: readAuth("user:carol", "GET", "/held") } })).status).toBe(401)
  })

  it("/healthz answers and /readyz is ready while NATS is up", async () => {
    expect((await get("/healthz")).status).toBe(200)
    const ready = await get("/readyz")
    expect(ready.status).toBe(200)
    expect(JSON.parse(ready.text)).toEqual({ status: "ready", checks: { nats: "ok", streams: "ok" } })
  })

  it("/metrics, on the metrics port only, counts requests by route and status (held ids folded into the route)", async () => {
    expect((await get("/metrics")).status).toBe(404)
    const before = (await get("/metrics", h.metricsUrl)).text
    expect((await post(`${h.url}/tool-calls`, transfer(25))).status).toBe(200)
    expect((await post(`${h.url}/tool-calls`, "not json")).status).toBe(400)
    await get("/held/h_0123456789abcdef0123456789abcdef")
    const m = await get("/metrics", h.metricsUrl)
    expect(m.type).toMatch(/^text\/plain/)
    const delta = (labels: string) => sample(m.text, "wk_gateway_requests_total", labels) - sample(before, "wk_gateway_requests_total", labels)
    expect(delta('route="/tool-calls",status="200"')).toBe(1)
    expect(delta('route="/tool-calls",status="400"')).toBe(1)
    expect(delta('route="/held/:held_id",status="401"')).toBe(1)
    expect(m.text).toMatch(/^wk_gateway_nats_connected 1$/m)
    expect(m.text).toMatch(/^process_cpu_seconds_total /m)
    expect(m.text).toMatch(/^wk_gateway_build_info\{version="[^"]+",nodejs_version="v[^"]+"\} 1$/m)
    expect(m.text).toMatch(/^wk_gateway_request_seconds_bucket\{le="[^"]+",route="\/tool-calls"\} \d+$/m)
  })

  it("with NATS gone: /readyz is 503 naming it, a proposal is refused 503 saying NATS is not connected, /healthz still answers", async () => {
    await h.nats.stop()
    // The connection's own disconnect event turns readiness (no request timeout is waited out).
    await eventually(async () => (await get("/readyz")).status === 503, 10_000)
    expect(JSON.parse((await get("/readyz")).text)).toMatchObject({ status: "not ready", checks: { nats: "not connected to NATS" } })
    const refused = await post(`${h.url}/tool-calls`, transfer(30))
    expect(refused).toMatchObject({ status: 503, body: { error: { code: "unavailable", message: expect.stringMatching(/^NATS is not connected/) } } })
    expect((await get("/healthz")).status).toBe(200)
    expect((await get("/metrics", h.metricsUrl)).text).toMatch(/^wk_gateway_nats_connected 0$/m)
  })
})
