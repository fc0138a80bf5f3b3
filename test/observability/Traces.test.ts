import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { context, trace, type Span } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { contextOfHeaders } from "../../runtime/observability/TraceContext.js"
import { kernelMetrics } from "../../runtime/observability/KernelMetrics.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"
import { eventually } from "../support/Stream.js"
import { HttpServer } from "@effect/platform"
import { Effect, ManagedRuntime } from "effect"
import { layerGateway } from "../../runtime/gateway/Gateway.js"
import { Roles } from "../support/TestNats.js"
import { readAuth, transfer as signedTransfer } from "../gateway/GatewayHarness.js"

// One trace per call: the agent's span is the parent of the kernel's; plugins, commits, the
// tool request (whose traceparent the tool service receives) and the delivery are in it; a
// witness's attestation is in the witness's trace, linked both ways to the call's.
let nats: TestNats
let kernel: InProcessKernel
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
const kernelSpans = new InMemorySpanExporter()
// The agent's and the witness's own tracing, as an application with the OpenTelemetry SDK has it.
const appSpans = new InMemorySpanExporter()
const app = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(appSpans)] }).getTracer("test-app")
// Trace ids the tool service saw on each invoke, by idempotency key.
const toolSaw = new Map<string, string | undefined>()

const rules = { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } }
const profile = testProfile({ rules: {}, plugins: [pinOf("spend-limit", { stages: ["adjudicate"], config: { rules } })] })

let n = 0
const transfer = (amount: number) => ({ session_id: "s-traces", turn_id: "t1", call_id: `tr${++n}`, tool: "money_transfer", args: { from: "a", to: "b", amount } })

/** Runs `f` inside a new span of the test application, as an instrumented agent or witness would. */
const inSpan = async <A>(name: string, f: (span: Span) => Promise<A>): Promise<A> => {
  const span = app.startSpan(name)
  try {
    return await context.with(trace.setSpan(context.active(), span), () => f(span))
  } finally {
    span.end()
  }
}

const spansOfTrace = (traceId: string) => kernelSpans.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId)
const named = (spans: ReadonlyArray<ReadableSpan>, prefix: string) => spans.filter((s) => s.name.startsWith(prefix))
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile], { traceExporter: kernelSpans })
  toolConn = await connectAs(nats.servers, "bank")
  toolConn.subscribe(Subjects.toolInvoke("money_transfer"), {
    callback: (_e, m) => {
      const req = m.json<{ idempotency_key: string; args: unknown }>()
      toolSaw.set(req.idempotency_key, trace.getSpanContext(contextOfHeaders(m.headers))?.traceId)
      m.respond(JSON.stringify({ ok: true, result: { applied: req.args } }))
    }
  })
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn].map((c) => c?.close()))
  await nats?.dispose()
  context.disable()
})

describe("traces", () => {
  it("an ALLOW is one trace from the agent's span through policy, commit and tool", async () => {
    const { agentTrace, agentSpan, reply } = await inSpan("agent.turn", async (span) => ({
      agentTrace: span.spanContext().traceId,
      agentSpan: span.spanContext().spanId,
      reply: (await alice.propose(transfer(50))) as { status: number; held_id: string }
    }))
    expect(reply.status).toBe(200)
    const spans = spansOfTrace(agentTrace)
    const [propose] = named(spans, "wk.propose")
    expect(propose).toBeDefined()
    expect(parentOf(propose!)).toBe(agentSpan)
    expect(propose!.attributes["wk.held_id"]).toBe(reply.held_id)
    expect(propose!.attributes["wk.outcome"]).toBe("completed")
    // Every kernel span of the call descends from wk.propose.
    const ids = new Set(spans.map((s) => s.spanContext().spanId))
    for (const s of spans) if (s !== propose) expect(ids.has(parentOf(s)!)).toBe(true)
    const [plugin] = named(spans, "wk.plugin")
    expect(plugin?.attributes["wk.plugin"]).toContain("spend-limit")
    expect(plugin?.attributes["wk.plugin.status"]).toBe("ok")
    // Its metric names the plugin and its version apart: an upgrade keeps the plugin's series.
    const [name, version] = String(plugin!.attributes["wk.plugin"]).split("@")
    expect(await kernelMetrics.registry.metrics()).toMatch(new RegExp(`^wk_plugin_call_seconds_count\\{plugin="${name}",plugin_version="${version!.replaceAll(".", "\\.")}",stage="adjudicate",status="ok"\\} [1-9]`, "m"))
    // The fuel it spent (the plugin runs metered), under the same labels.
    expect(await kernelMetrics.registry.metrics()).toMatch(new RegExp(`^wk_plugin_fuel_units_count\\{plugin="${name}",plugin_version="${version!.replaceAll(".", "\\.")}",stage="adjudicate"\\} [1-9]`, "m"))
    expect(named(spans, "wk.commit").length).toBeGreaterThanOrEqual(2)
    const [tool] = named(spans, "wk.tool")
    expect(tool?.name).toBe("wk.tool invoke")
    // The tool service received the same trace on its request.
    expect([...toolSaw.values()]).toContain(agentTrace)
  })

  it("a held call's release and delivery join the call's trace; the witness's attestation links to it", async () => {
    const { agentTrace, held } = await inSpan("agent.turn", async (span) => ({
      agentTrace: span.spanContext().traceId,
      held: (await alice.propose(transfer(5_000))) as { status: number; held_id: string }
    }))
    expect(held.status).toBe(202)
    const { witnessTrace, attested } = await inSpan("witness.review", async (span) => ({
      witnessTrace: span.spanContext().traceId,
      attested: await carol.decide(held.held_id, "human")
    }))
    expect(attested.disposition).toBe("accepted")
    expect(witnessTrace).not.toBe(agentTrace)
    await eventually(async () => named(spansOfTrace(agentTrace), "wk.deliver").length === 1)

    const callSpans = spansOfTrace(agentTrace)
    const [attestation] = named(callSpans, "wk.attestation")
    expect(attestation?.attributes["wk.witness"]).toBe("user:carol")
    expect(attestation?.parentSpanContext?.spanId).toBe(named(callSpans, "wk.propose")[0]!.spanContext().spanId)
    // The release (tool and its commits) runs under the attestation, in the call's trace.
    const [tool] = named(callSpans, "wk.tool")
    expect(tool).toBeDefined()
    expect(toolSaw.size).toBe(2)
    expect([...toolSaw.values()].filter((t) => t === agentTrace).length).toBe(1)

    // The witness's trace holds its request's server span, linked from the call's attestation span.
    const [attest] = named(spansOfTrace(witnessTrace), "wk.attest")
    expect(attest).toBeDefined()
    expect(attestation!.links.map((l) => l.context.spanId)).toContain(attest!.spanContext().spanId)
  })

  it("the gateway continues an HTTP request's trace in a span of its own, writes and reads alike, and the kernel's spans are its children", async () => {
    const gateway = ManagedRuntime.make(layerGateway({ nats: { servers: nats.servers, ...Roles.gateway }, port: 0 }))
    try {
      const address = await gateway.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
      if (address._tag !== "TcpAddress") throw new Error("gateway is not on TCP")
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
      const spanId = "00f067aa0ba902b7"
      const r = await fetch(`http://127.0.0.1:${address.port}/tool-calls`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${traceId}-${spanId}-01` },
        body: JSON.stringify(signedTransfer(20, "s-traces-gw"))
      })
      expect(r.status).toBe(200)
      const heldId = ((await r.json()) as { held_id: string }).held_id
      const [post] = named(spansOfTrace(traceId), "wk.gateway POST /tool-calls")
      expect(parentOf(post!)).toBe(spanId)
      expect(post!.attributes["http.response.status_code"]).toBe(200)
      const [propose] = named(spansOfTrace(traceId), "wk.propose")
      expect(parentOf(propose!)).toBe(post!.spanContext().spanId)
      expect(named(spansOfTrace(traceId), "wk.tool").length).toBe(1)

      // A signed read: the gateway's span in the caller's (another) trace, the kernel's read under it.
      const readTrace = "5cf92f3577b34da6a3ce929d0e0e4737"
      const readSpan = "11f067aa0ba902b8"
      const read = await fetch(`http://127.0.0.1:${address.port}/held/${heldId}`, {
        headers: { traceparent: `00-${readTrace}-${readSpan}-01`, authorization: readAuth("agent:alice", "GET", `/held/${heldId}`) }
      })
      expect(read.status).toBe(200)
      const [get] = named(spansOfTrace(readTrace), "wk.gateway GET /held/:held_id")
      expect(parentOf(get!)).toBe(readSpan)
      const [kernelRead] = named(spansOfTrace(readTrace), "wk.get")
      expect(kernelRead).toBeDefined()
      expect(parentOf(kernelRead!)).toBe(get!.spanContext().spanId)
    } finally {
      await gateway.dispose()
    }
  })
})
