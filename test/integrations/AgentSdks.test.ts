import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { generateText } from "ai"
import { MockLanguageModelV2 } from "ai/test"
import { Agent, run, setTracingDisabled } from "@openai/agents"
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents/testing"
import { Annotation, Command, END, MemorySaver, START, StateGraph } from "@langchain/langgraph"
import { z } from "zod"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { GovernedOutcome } from "../../runtime/integrations/GovernedCall.js"
import { governedTool as aiSdkTool, heldResultTool as aiSdkResultTool } from "../../runtime/integrations/ai-sdk/GovernedTool.js"
import { governedTool as agentsTool, heldCallOf, heldResultTool as agentsResultTool } from "../../runtime/integrations/openai-agents/GovernedTool.js"
import { governedStep, type HeldInterrupt } from "../../runtime/integrations/langgraph/GovernedStep.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import nacl from "tweetnacl"

// The agent SDK adapters against a real kernel over NATS, with no model: each SDK's own test
// model (or the graph itself) drives its tool-execution path. `web_fetch` is allowed, `deploy`
// always needs a human witness, `crm_update` is not granted to the agent.
let nats: TestNats
let kernel: InProcessKernel
let echo: EchoTool
let echoConn: NatsConnection
let agentConn: NatsConnection
let witnessConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient

const profile = testProfile({
  grants: { "agent:alice": ["web_fetch", "deploy"] },
  rules: { deploy: { always_witness: true, contract: { rule: { class: "human" } } } }
})
/** Tool runs by the tool service, whatever the key (the kernel's at-most-once is the claim). */
const runs = () => [...echo.invocations.values()].reduce((a, b) => a + b, 0)
const effectsOf = (tool: string) => [...echo.applied.values()].filter((v) => (v as { tool: string }).tool === tool).length

beforeAll(async () => {
  setTracingDisabled(true)
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  echoConn = await connectAs(nats.servers, "echo")
  echo = new EchoTool(["web_fetch", "deploy", "crm_update"]).serve(echoConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
}, 60_000)

afterAll(async () => {
  echo?.stop()
  await kernel?.stop()
  await Promise.all([echoConn, agentConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("wk.v1.grants.get: what an agent may offer its model", () => {
  it("answers the signed reader's own grants, and refuses a reader whose key is not the principal's", async () => {
    expect(await alice.grants()).toMatchObject({ status: 200, principal: "agent:alice", tools: ["deploy", "web_fetch"] })
    const read = { op: "read", principal: "agent:alice", path: Subjects.grants, issued_at: new Date().toISOString(), nonce: "n0nce-forged-1" }
    // Signed by bob's key while naming alice, and by a key nobody registered: 401 both.
    const asBob = signEnvelope(read, devKeyPair("agent:bob").secretKey)
    expect((await alice.request<{ status: number }>(Subjects.grants, { reader: asBob })).status).toBe(401)
    const stranger = signEnvelope({ ...read, nonce: "n0nce-forged-2" }, nacl.sign.keyPair().secretKey)
    expect((await alice.request<{ status: number }>(Subjects.grants, { reader: stranger })).status).toBe(401)
  })
})

describe("Vercel AI SDK: a tool whose execute goes through the kernel", () => {
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
  /** A model that calls `toolName` once with `input`, as call `toolCallId`. */
  const callingModel = (toolCallId: string, toolName: string, input: unknown) =>
    new MockLanguageModelV2({ doGenerate: async () => ({ content: [{ type: "tool-call" as const, toolCallId, toolName, input: JSON.stringify(input) }], finishReason: "tool-calls" as const, usage, warnings: [] }) })
  // Built per call: the client exists once beforeAll has run.
  const toolsOf = () => ({
    web_fetch: aiSdkTool({ client: alice, tool: "web_fetch", description: "fetch a URL", inputSchema: z.object({ url: z.string() }), sessionId: "s-ai", turnId: "ai-1" }),
    deploy: aiSdkTool({ client: alice, tool: "deploy", description: "deploy a service", inputSchema: z.object({ service: z.string() }), sessionId: "s-ai", turnId: "ai-1" }),
    crm_update: aiSdkTool({ client: alice, tool: "crm_update", description: "update the CRM", inputSchema: z.object({ id: z.string() }), sessionId: "s-ai", turnId: "ai-1" })
  })
  const outputOf = async (toolCallId: string, toolName: "web_fetch" | "deploy" | "crm_update", input: unknown) => {
    const r = await generateText({ model: callingModel(toolCallId, toolName, input), tools: toolsOf(), prompt: "go" })
    const result = r.toolResults[0]
    if (result === undefined) throw new Error(`no tool result: ${JSON.stringify(r.steps[0]?.content)}`)
    return result.output as GovernedOutcome
  }

  it("an allowed call returns the tool's result, run once by the kernel", async () => {
    const before = effectsOf("web_fetch")
    const out = await outputOf("call-fetch-1", "web_fetch", { url: "https://example.com" })
    expect(out).toMatchObject({ status: "completed", result: { tool: "web_fetch", args: { url: "https://example.com" } } })
    expect(effectsOf("web_fetch")).toBe(before + 1)
  })

  it("a call outside the grants is denied with the kernel's reasons; a held one runs only after a witness, once", async () => {
    const denied = await outputOf("call-crm-1", "crm_update", { id: "42" })
    expect(denied.status).toBe("denied")
    expect(denied.status === "denied" && denied.reasons[0]?.reason).toMatch(/crm_update/)
    expect(effectsOf("crm_update")).toBe(0)

    const held = await outputOf("call-deploy-1", "deploy", { service: "api" })
    expect(held.status).toBe("held")
    // The model (or the app) asking again with the same tool call id is the same held call: still held, nothing ran.
    expect((await outputOf("call-deploy-1", "deploy", { service: "api" })).status).toBe("held")
    expect(effectsOf("deploy")).toBe(0)
    expect((await carol.decide(held.status === "held" ? held.held_id : "", "human")).disposition).toBe("accepted")
    const after = await aiSdkTool({ client: alice, tool: "deploy", description: "deploy", inputSchema: z.object({ service: z.string() }), sessionId: "s-ai", turnId: "ai-1", waitMs: 10_000 }).execute!({ service: "api" }, { toolCallId: "call-deploy-1", messages: [] })
    expect(after).toMatchObject({ status: "completed", result: { tool: "deploy" } })
    expect(effectsOf("deploy")).toBe(1)
  })

  it("a later turn resumes a held call by its held id, under a new tool call id: held until the witness, then its result, run once; another agent reads nothing", async () => {
    const runsBefore = runs()
    const held = await outputOf("call-deploy-2", "deploy", { service: "worker" })
    expect(held.status).toBe("held")
    const heldId = held.status === "held" ? held.held_id : ""
    /** A later turn: the model calls wk_result with the held id, as a tool call of its own new id. */
    const resumeAs = async (client: WitnessClient, toolCallId: string) => {
      const model = callingModel(toolCallId, "wk_result", { held_id: heldId })
      const r = await generateText({ model, tools: { wk_result: aiSdkResultTool({ client, sessionId: "s-ai", waitMs: 5_000 }) }, prompt: "did the deploy run?" })
      return r.toolResults[0]?.output as GovernedOutcome
    }
    const early = await resumeAs(alice, "call-later-1")
    expect(early).toMatchObject({ status: "held", held_id: heldId })
    expect(runs()).toBe(runsBefore)
    expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
    const done = await resumeAs(alice, "call-later-2")
    expect(done).toMatchObject({ status: "completed", held_id: heldId, result: { tool: "deploy", args: { service: "worker" } } })
    expect((await resumeAs(alice, "call-later-3")).status).toBe("completed")
    expect(runs()).toBe(runsBefore + 1)
    // Another agent with the held id reads nothing of it.
    const bob = clientFor(agentConn, "agent:bob")
    expect((await resumeAs(bob, "call-bob-1")).status).toBe("refused")
  })
})

describe("OpenAI Agents SDK: needsApproval and interruptions backed by held calls", () => {
  const deploy = () => agentsTool({ client: alice, tool: "deploy", description: "deploy a service", parameters: z.object({ service: z.string() }), sessionId: "s-agents", turnId: "agents-1", waitMs: 5_000 })
  const fetchTool = () => agentsTool({ client: alice, tool: "web_fetch", description: "fetch a URL", parameters: z.object({ url: z.string() }), sessionId: "s-agents", turnId: "agents-1" })

  it("an allowed call needs no approval and runs once", async () => {
    const before = effectsOf("web_fetch")
    const model = new ScriptedModel([[functionCall("web_fetch", { url: "https://openai.example" }, { callId: "ag-fetch-1" })], [assistantMessage("fetched")]])
    const result = await run(new Agent({ name: "fetcher", instructions: "fetch", model, tools: [fetchTool()] }), "fetch it")
    expect(result.interruptions).toEqual([])
    expect(result.finalOutput).toBe("fetched")
    expect(effectsOf("web_fetch")).toBe(before + 1)
  })

  it("a held call interrupts the run; approving in the SDK alone runs nothing; after the witness, the resumed run gets the kernel's result", async () => {
    const runsBefore = runs()
    const model = new ScriptedModel([[functionCall("deploy", { service: "web" }, { callId: "ag-deploy-1" })], [assistantMessage("deploy reported")], [assistantMessage("deploy done")]])
    const agent = new Agent({ name: "deployer", instructions: "deploy", model, tools: [deploy()] })
    const deploysBefore = effectsOf("deploy")
    const first = await run(agent, "deploy web")
    expect(first.interruptions).toHaveLength(1)
    expect(effectsOf("deploy")).toBe(deploysBefore)
    // The interruption names its held call: what a person finds in the inbox.
    const heldCall = heldCallOf(first.interruptions[0]!)
    expect(heldCall?.held_id).toMatch(/^h_[0-9a-f]{32}$/)

    // The app approves in the SDK without any witness: the kernel still holds the call.
    first.state.approve(first.interruptions[0]!)
    const selfApproved = await run(agent, first.state)
    expect(selfApproved.finalOutput).toBe("deploy reported")
    const toolOutput = selfApproved.newItems.find((i) => i.type === "tool_call_output_item") as { output: unknown } | undefined
    expect(JSON.stringify(toolOutput?.output)).toContain('"status":"held"')
    expect(runs()).toBe(runsBefore)

    // A witness attests; the model calls the tool again with the same call id: the kernel's result.
    const heldId = JSON.parse(JSON.stringify(toolOutput!.output)) as { held_id?: string } | string
    const id = typeof heldId === "string" ? (JSON.parse(heldId) as { held_id: string }).held_id : heldId.held_id!
    expect(id).toBe(heldCall!.held_id)
    expect((await carol.decide(id, "human")).disposition).toBe("accepted")
    const again = new ScriptedModel([[functionCall("deploy", { service: "web" }, { callId: "ag-deploy-1" })], [assistantMessage("deploy done")]])
    const resumed = await run(new Agent({ name: "deployer", instructions: "deploy", model: again, tools: [deploy()] }), "deploy web")
    const interruption = resumed.interruptions[0]
    const finished = interruption === undefined ? resumed : await run(new Agent({ name: "deployer", instructions: "deploy", model: again, tools: [deploy()] }), (resumed.state.approve(interruption), resumed.state))
    expect(finished.finalOutput).toBe("deploy done")
    const out = finished.newItems.find((i) => i.type === "tool_call_output_item") as { output: unknown }
    expect(JSON.stringify(out.output)).toContain('"status":"completed"')
    expect(effectsOf("deploy")).toBe(deploysBefore + 1)
    expect(runs()).toBe(runsBefore + 1)

    // A later run whose model asks by held id (a new call id): the same result, nothing run again.
    const later = new ScriptedModel([[functionCall("wk_result", { held_id: id }, { callId: "ag-later-1" })], [assistantMessage("it ran")]])
    const asked = await run(new Agent({ name: "deployer", instructions: "report", model: later, tools: [agentsResultTool({ client: alice, sessionId: "s-agents" })] }), "did it run?")
    expect(asked.interruptions).toEqual([])
    const read = asked.newItems.find((i) => i.type === "tool_call_output_item") as { output: unknown }
    expect(JSON.stringify(read.output)).toContain('"status":"completed"')
    expect(runs()).toBe(runsBefore + 1)
  })
})

describe("LangGraph: an interrupt backed by a held call", () => {
  const State = Annotation.Root({ outcome: Annotation<GovernedOutcome | null>() })
  const graph = new StateGraph(State)
    .addNode("deploy", async () => ({ outcome: await governedStep(alice, { session_id: "s-graph", turn_id: "thread-1", call_id: "deploy-db" }, "deploy", { service: "db" }, 3_000) }))
    .addEdge(START, "deploy")
    .addEdge("deploy", END)
    .compile({ checkpointer: new MemorySaver() })
  const config = { configurable: { thread_id: "thread-1" } }
  const interruptOf = (r: unknown) => (r as { __interrupt__?: Array<{ value: HeldInterrupt }> }).__interrupt__?.[0]?.value

  it("a forged resume runs nothing; after the witness, two concurrent resumes run the tool once", async () => {
    const before = effectsOf("deploy")
    const runsBefore = runs()
    const first = await graph.invoke({ outcome: null }, config)
    const held = interruptOf(first)
    expect(held?.held_id).toMatch(/^h_/)

    // A resume that claims approval, with no attestation: interrupted again, nothing ran.
    const forged = await graph.invoke(new Command({ resume: { approved: true } }), config)
    expect(interruptOf(forged)?.held_id).toBe(held!.held_id)
    expect(runs()).toBe(runsBefore)

    expect((await carol.decide(held!.held_id, "human")).disposition).toBe("accepted")
    const [a, b] = await Promise.all([graph.invoke(new Command({ resume: "go" }), config), graph.invoke(new Command({ resume: "go" }), config)])
    for (const r of [a, b]) expect((r as { outcome: GovernedOutcome }).outcome).toMatchObject({ status: "completed", held_id: held!.held_id })
    expect(effectsOf("deploy")).toBe(before + 1)
    expect(runs()).toBe(runsBefore + 1)
  })
})
