import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import { jetstream, DeliverPolicy } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { presentationDigest } from "../../runtime/schema/Canonical.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { RouteRunner, type DeliveryRecord } from "../../runtime/routes/RouteRunner.js"
import { sendThrough, webhookSignature, type RoutedRequest } from "../../runtime/routes/Senders.js"
import { decodeRouteConfig } from "../../runtime/routes/RouteConfig.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { connect } from "@nats-io/transport-node"
import { inboxOptionOf } from "../../runtime/schema/Subjects.js"

// Witness routes as durable work: a signed webhook (a real HTTP receiver the test runs) that
// fails twice and then answers with carol's signed approval, and email through a real SMTP
// server from the npm registry. Every attempt is recorded in WK_WITNESS; a request that arrived
// while the route was down is delivered once it is back.
const Secret = "route-secret-0123456789"
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let routeConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let hook: Server
let smtp: SMTPServer
let runner: RouteRunner | undefined
const hookCalls: Array<{ signatureOk: boolean; body: RoutedRequest }> = []
const mails: Array<string> = []
const records: Array<DeliveryRecord> = []
let failuresLeft = 2

const listen = (s: { listen: (port: number, host: string, cb: () => void) => unknown; address: () => unknown }) =>
  new Promise<number>((resolve) => s.listen(0, "127.0.0.1", () => resolve((s.address() as AddressInfo).port)))

const config = (hookPort: number, smtpPort: number) => {
  const c = decodeRouteConfig(
    JSON.stringify({
      gateway_url: "http://127.0.0.1:8787",
      retry: { base_ms: 100, max_ms: 400 },
      routes: { ops: { kind: "webhook", url: `http://127.0.0.1:${hookPort}/hook`, secret: Secret }, mail: { kind: "smtp", host: "127.0.0.1", port: smtpPort, from: "wk@example.com", to: ["carol@example.com"] } }
    }),
    "routes.json"
  )
  if (c._tag === "Left") throw new Error(c.left)
  return c.right
}

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  routeConn = await connect({ servers: nats.servers, user: "route", pass: "route-dev", ...inboxOptionOf("route") })
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  // The receiver checks the signature, fails twice, then answers with carol's signed approval of what it was shown.
  hook = createServer((req, res) => {
    let text = ""
    req.on("data", (d: Buffer) => (text += d.toString()))
    req.on("end", () => {
      const body = JSON.parse(text) as RoutedRequest & { witness_request: { contract_digest: string; presentation: Record<string, unknown> } }
      hookCalls.push({ signatureOk: req.headers["x-wk-signature"] === webhookSignature(Secret, text), body })
      if (failuresLeft-- > 0) return void res.writeHead(500).end("not yet")
      void carol.get(body.held_id).then((got) => {
        const h = got.held!
        const answer = carol.sign({ op: "attest", principal: "user:carol", class: "human", held_id: body.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest!, decision: "approve", presentation_digest: presentationDigest(body.witness_request.presentation), issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString(), nonce: `hook-${body.held_id.slice(2, 14)}` })
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer))
      })
    })
  })
  smtp = new SMTPServer({ authOptional: true, disabledCommands: ["STARTTLS"], onData: (stream, _session, cb) => {
    let mail = ""
    stream.on("data", (d: Buffer) => (mail += d.toString()))
    // Quoted-printable soft line breaks undone, so the text reads as sent.
    stream.on("end", () => (mails.push(mail.replace(/=\r\n/g, "")), cb()))
  } })
}, 60_000)

afterAll(async () => {
  await runner?.stop()
  hook?.close()
  smtp?.close()
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, routeConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("witness routes", () => {
  it("a request made while the routes are down is delivered when they start: the webhook is retried until it takes it, its signed answer releases the call, the email arrives, every attempt is recorded", async () => {
    const hookPort = await listen(hook)
    await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", () => resolve()))
    const smtpPort = (smtp.server.address() as AddressInfo).port
    // The routes' consumers exist (as after a first start) but nothing runs while the call is held.
    runner = await new RouteRunner(routeConn, config(hookPort, smtpPort)).start()
    await runner.stop()
    const r = (await alice.propose({ session_id: "s-routes", turn_id: "t1", call_id: "r1", tool: "money_transfer", args: { from: "route-1", to: "shop", amount: 2_000 } })) as { status: number; held_id: string }
    expect(r.status).toBe(202)

    runner = await new RouteRunner(routeConn, config(hookPort, smtpPort), (rec) => records.push(rec)).start()
    await eventually(async () => bank.effects === 1)
    await eventually(async () => mails.some((m) => m.includes(r.held_id)))
    expect(mails.find((m) => m.includes(r.held_id))).toContain(`http://127.0.0.1:8787/inbox/#/held/${r.held_id}`)
    expect(hookCalls.map((c) => c.signatureOk)).toEqual([true, true, true])
    const mine = records.filter((x) => x.held_id === r.held_id && x.route === "ops")
    expect(mine.map((x) => [x.status, x.attempt])).toEqual([["failed", 1], ["failed", 2], ["delivered", 3]])
    expect(mine[2]!.answer).toBe("accepted")

    // The records are kept in WK_WITNESS for whoever audits the routes.
    const kept: Array<DeliveryRecord> = []
    const c = await jetstream(routeConn).consumers.get(Streams.witness, { filter_subjects: `wk.v1.witness.deliveries.ops.${r.held_id}`, deliver_policy: DeliverPolicy.All })
    for (let i = 0; i < 3; i++) kept.push((await c.next({ expires: 5_000 }))!.json<DeliveryRecord>())
    expect(kept.map((x) => x.status)).toEqual(["failed", "failed", "delivered"])
  })

  it("a route's first start serves requests made before it ever ran", async () => {
    const seen: Array<RoutedRequest> = []
    const late = createServer((req, res) => {
      let text = ""
      req.on("data", (d: Buffer) => (text += d.toString()))
      req.on("end", () => (seen.push(JSON.parse(text) as RoutedRequest), res.writeHead(200).end()))
    })
    const port = await listen(late)
    try {
      const r = (await alice.propose({ session_id: "s-routes", turn_id: "t1", call_id: "r-late", tool: "money_transfer", args: { from: "route-late", to: "shop", amount: 2_100 } })) as { status: number; held_id: string }
      expect(r.status).toBe(202)
      // No consumer named route_late exists until this start.
      const c = decodeRouteConfig(JSON.stringify({ routes: { late: { kind: "webhook", url: `http://127.0.0.1:${port}/late`, secret: Secret } } }), "routes.json")
      if (c._tag === "Left") throw new Error(c.left)
      const first = await new RouteRunner(routeConn, c.right).start()
      try {
        const got = await eventually(async () => seen.find((x) => x.held_id === r.held_id))
        expect(got).toMatchObject({ held_id: r.held_id, generation: 1 })
      } finally {
        await first.stop()
      }
    } finally {
      late.close()
    }
  })

  it("agent markup reaches no medium as markup: chat text escapes & < >, the mail's HTML escapes, no control character anywhere", async () => {
    const chats: Array<string> = []
    const chat = createServer((req, res) => {
      let text = ""
      req.on("data", (d: Buffer) => (text += d.toString()))
      req.on("end", () => (chats.push((JSON.parse(text) as { text: string }).text), res.writeHead(200).end()))
    })
    const port = await listen(chat)
    const smtpPort = (smtp.server.address() as AddressInfo).port
    const hostile = "<!channel> <http://evil|label> & <@U123>"
    // The first test's routes approve what they deliver: stopped, the hostile call stays open.
    await runner?.stop()
    runner = undefined
    try {
      const r = (await alice.propose({ session_id: "s-routes", turn_id: "t1", call_id: "r-hostile", tool: "money_transfer", args: { from: "route-hostile", to: hostile, amount: 2_200 } })) as { status: number; held_id: string }
      expect(r.status).toBe(202)
      const c = decodeRouteConfig(JSON.stringify({ gateway_url: "http://127.0.0.1:8787", routes: { chat: { kind: "webhook", format: "chat", url: `http://127.0.0.1:${port}/chat`, secret: Secret }, mail2: { kind: "smtp", host: "127.0.0.1", port: smtpPort, from: "wk@example.com", to: ["dave@example.com"] } } }), "routes.json")
      if (c._tag === "Left") throw new Error(c.left)
      const routes = await new RouteRunner(routeConn, c.right).start()
      try {
        const text = await eventually(async () => chats.find((t) => t.includes(r.held_id)))
        // What the agent wrote is there, as text: no mention, no relabelled link.
        expect(text).toContain("&lt;!channel&gt; &lt;http://evil|label&gt; &amp; &lt;@U123&gt;")
        expect(text).not.toMatch(/<!channel>|<http:\/\/evil|<@U123>/)
        // The route's own link is the only markup.
        expect(text.match(/<[^>]*>/g)).toEqual([`<http://127.0.0.1:8787/inbox/#/held/${r.held_id}>`])
        const mail = await eventually(async () => mails.find((m) => m.includes(r.held_id) && m.includes("dave@example.com")))
        const html = mail.slice(mail.indexOf("Content-Type: text/html"))
        expect(html).toContain("&lt;!channel&gt; &lt;http://evil|label&gt; &amp;")
        expect(html).not.toMatch(/<!channel>|<http:\/\/evil/)
      } finally {
        await routes.stop()
      }

      // A summary with line breaks and bidi overrides (a plugin's or a contract's) is one line in every medium.
      const forged: RoutedRequest = { held_id: "h_" + "0".repeat(32), generation: 1, expires_at: "2030-01-01T00:00:00Z", witness_request: { presentation: { summary: "pay bob\r\nBcc: eve@evil.example\n\u202eApproved by carol\u0007" } } }
      await sendThrough({ kind: "webhook", format: "chat", url: `http://127.0.0.1:${port}/chat`, secret: Secret }, undefined)(forged)
      await sendThrough({ kind: "smtp", host: "127.0.0.1", port: smtpPort, secure: false, from: "wk@example.com", to: ["erin@example.com"] }, undefined)(forged)
      const line = await eventually(async () => chats.find((t) => t.includes(forged.held_id)))
      expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/)
      const forgedMail = await eventually(async () => mails.find((m) => m.includes("erin@example.com")))
      expect(forgedMail).not.toMatch(/^Bcc:/im)
      expect(forgedMail).not.toContain("eve@evil.example\r\n")
    } finally {
      chat.close()
    }
  })

  it("a bad route config names the field", () => {
    expect(decodeRouteConfig(JSON.stringify({ routes: { ops: { kind: "webhook", url: "ftp://x", secret: Secret } } }), "routes.json")).toMatchObject({ _tag: "Left", left: expect.stringMatching(/routes\.ops/) })
    expect(decodeRouteConfig(JSON.stringify({ routes: { ops: { kind: "webhook", url: "http://x", secret: "short" } } }), "routes.json")).toMatchObject({ _tag: "Left", left: expect.stringMatching(/at least 16/) })
  })
})
