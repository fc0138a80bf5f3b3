import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { getAs, post, signedAs, startGatewayHarness, transfer, type GatewayHarness } from "./GatewayHarness.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { eventually } from "../support/Stream.js"

// Standing approvals over the HTTP gateway, as a client written from docs/gateway.md would use
// them: grant (signed body), list (signed read), revoke (signed body); and what an attacker with
// only the gateway can do: nothing unsigned, nothing in another's name, no replayed use.
let h: GatewayHarness
const hours = (n: number) => new Date(Date.now() + n * 3_600_000).toISOString()
const grantBody = (principal: string, grantId: string, over: Record<string, unknown> = {}) =>
  signedAs(principal, {
    op: "standing.grant",
    class: "human",
    grant_id: grantId,
    scope: { principals: ["agent:alice"], tool: "money_transfer", args: { from: { eq: "alice" }, to: { eq: "bob" }, amount: { max: 5_000 } } },
    max_uses: 2,
    issued_at: new Date().toISOString(),
    expires_at: hours(1),
    nonce: randomBytes(12).toString("hex"),
    ...over
  })
let n = 0
/** A transfer by agent:alice to `to`, as /tool-calls takes it. */
const transferTo = (to: unknown, amount: number) =>
  signedAs("agent:alice", { op: "propose", session_id: "s-gw-standing", turn_id: "t1", call_id: `std${++n}`, tool: "money_transfer", args: { from: "alice", to, amount }, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() })
const revokeBody = (principal: string, grantId: string) => signedAs(principal, { op: "standing.revoke", grant_id: grantId, issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") })
const heldView = async (id: string) => (await getAs(h.url, "user:carol", `/held/${id}`)).body["held"] as { lifecycle: string; evidence: Array<{ witness: string; standing?: string }> }

beforeAll(async () => {
  h = await startGatewayHarness()
}, 60_000)

afterAll(async () => {
  await h?.stop()
})

describe("standing approvals over the gateway", () => {
  it("POST /standing records a grant; a matching call posted to /tool-calls is released by it; GET /standing shows the use", async () => {
    const g = await post(`${h.url}/standing`, grantBody("user:carol", "gw-grant"))
    expect(g).toMatchObject({ status: 201, body: { disposition: "recorded", grant_id: "gw-grant", uses: [] } })
    const before = h.bank.effects
    const p = await post(`${h.url}/tool-calls`, transfer(2_000))
    await eventually(async () => (await heldView(p.body["held_id"])).lifecycle === "completed")
    expect(h.bank.effects).toBe(before + 1)
    expect((await heldView(p.body["held_id"])).evidence).toEqual([expect.objectContaining({ witness: "user:carol", standing: "gw-grant" })])
    const list = await getAs(h.url, "user:carol", "/standing")
    expect(list.status).toBe(200)
    expect(list.body["grants"]).toEqual([expect.objectContaining({ grant_id: "gw-grant", uses: [expect.objectContaining({ held_id: p.body["held_id"] })] })])
    // The agent it covers reads it too.
    expect((await getAs(h.url, "agent:alice", "/standing")).body["grants"]).toHaveLength(1)
  })

  it("the same signed grant posted again is a duplicate and adds nothing; a replayed grant cannot reset its uses", async () => {
    const body = grantBody("user:carol", "gw-once", { max_uses: 1, scope: { principals: ["agent:alice"], tool: "money_transfer", args: { from: { eq: "alice" }, to: { eq: "landlord" }, amount: { any: true } } } })
    expect((await post(`${h.url}/standing`, body)).status).toBe(201)
    const p = await post(`${h.url}/tool-calls`, transferTo("landlord", 1_500))
    await eventually(async () => (await heldView(p.body["held_id"])).lifecycle === "completed")
    const again = await post(`${h.url}/standing`, body)
    expect(again).toMatchObject({ status: 200, body: { disposition: "duplicate", uses: [expect.objectContaining({ held_id: p.body["held_id"] })] } })
    const spent = await post(`${h.url}/tool-calls`, transferTo("landlord", 1_600))
    expect(spent.status).toBe(202)
    expect((await heldView(spent.body["held_id"])).evidence).toEqual([])
  })

  it("an attacker with only the gateway: unsigned, forged in carol's name, or revoking carol's grant as dave -> refused", async () => {
    expect((await getAs(h.url, null, "/standing")).status).toBe(401)
    const carol = grantBody("user:carol", "gw-unsigned")
    expect((await post(`${h.url}/standing`, { payload: carol.payload })).status).toBe(401)
    const badSig = { ...carol, sig: Buffer.from(randomBytes(64)).toString("base64") }
    expect((await post(`${h.url}/standing`, badSig)).status).toBe(401)
    const forged = signEnvelope(grantBody("user:carol", "gw-forged").payload, devKeyPair("agent:mallory").secretKey)
    expect((await post(`${h.url}/standing`, forged)).status).toBe(401)
    expect((await post(`${h.url}/standing/revocations`, revokeBody("user:dave", "gw-grant"))).status).toBe(403)
    const list = await getAs(h.url, "admin:root", "/standing")
    expect(list.body["grants"].map((g: { grant_id: string }) => g.grant_id)).not.toContain("gw-forged")
  })

  it("a grant bounds every argument: one that leaves the recipient unbounded approves no transfer; one that bounds the recipient object whole approves that recipient only", async () => {
    const dave = { name: "dave", iban: "DE02 1203 0000 0000 2020 51" }
    // What an inbox that skipped object arguments offered: the amount only. It is recorded, and approves no call that has other arguments.
    const amountOnly = grantBody("user:dave", "gw-amount-only", { scope: { principals: ["agent:alice"], tool: "money_transfer", args: { amount: { max: 3_000 } } } })
    expect((await post(`${h.url}/standing`, amountOnly)).status).toBe(201)
    const toMallory = await post(`${h.url}/tool-calls`, transferTo({ name: "mallory", iban: "GB33 BUKB 2020 1555 5555 55" }, 2_500))
    expect(toMallory.status).toBe(202)
    expect((await heldView(toMallory.body["held_id"])).evidence).toEqual([])

    // The recipient bounded whole (eq on its canonical JSON): another recipient object is outside, whatever differs.
    const whole = grantBody("user:erin", "gw-whole", { scope: { principals: ["agent:alice"], tool: "money_transfer", args: { from: { eq: "alice" }, to: { eq: dave }, amount: { max: 3_000 } } } })
    expect((await post(`${h.url}/standing`, whole)).status).toBe(201)
    for (const other of [{ ...dave, iban: "GB33 BUKB 2020 1555 5555 55" }, { ...dave, name: "mallory" }, { ...dave, note: "also" }, "dave"]) {
      const p = await post(`${h.url}/tool-calls`, transferTo(other, 2_500))
      expect(p.status, JSON.stringify(other)).toBe(202)
      expect((await heldView(p.body["held_id"])).evidence, JSON.stringify(other)).toEqual([])
    }
    // The same recipient, its keys in another order, is inside: erin's grant approves it.
    const same = await post(`${h.url}/tool-calls`, transferTo({ iban: dave.iban, name: dave.name }, 2_500))
    await eventually(async () => (await heldView(same.body["held_id"])).evidence.some((e) => e.standing === "gw-whole"))
    expect((await heldView(same.body["held_id"])).evidence.map((e) => e.standing)).toEqual(["gw-whole"])
  })

  it("POST /standing/revocations by the granting witness revokes it: the next matching call stays held", async () => {
    const r = await post(`${h.url}/standing/revocations`, revokeBody("user:carol", "gw-grant"))
    expect(r).toMatchObject({ status: 200, body: { disposition: "revoked", revoked_by: "user:carol" } })
    const p = await post(`${h.url}/tool-calls`, transfer(2_500))
    expect(p.status, JSON.stringify(p.body)).toBe(202)
    expect((await heldView(p.body["held_id"])).evidence).toEqual([])
  })
})
