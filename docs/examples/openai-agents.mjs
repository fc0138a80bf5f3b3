// OpenAI Agents SDK: a held call is the run's interruption, and heldCallOf names its held id.
// The model here is the SDK's scripted test model; any model works the same way.
import { Agent, run, setTracingDisabled } from "@openai/agents"
import { assistantMessage, functionCall, ScriptedModel } from "@openai/agents/testing"
import { z } from "zod"
import { governedTool, heldCallOf, heldResultTool } from "witness-kernel/openai-agents"
import { connectAlice, transfer } from "./client.mjs"

setTracingDisabled(true)
const client = await connectAlice()
const money = governedTool({ client, tool: "money_transfer", description: "move money", parameters: z.object({ from: z.string(), to: z.string(), amount: z.number() }), sessionId: "alice.agents" })
const model = new ScriptedModel([[functionCall("money_transfer", transfer, { callId: `call-${Date.now()}` })], [assistantMessage("paid")]])
const agent = new Agent({ name: "payer", instructions: "pay", model, tools: [money, heldResultTool({ client, sessionId: "alice.agents" })] })
const result = await run(agent, "pay bob 250")
// An allowed call ran already (no interruption); a held one names the call a person approves in the inbox.
for (const i of result.interruptions) console.log("held:", heldCallOf(i)?.held_id)
const output = result.newItems.find((i) => i.type === "tool_call_output_item")?.output
console.log(typeof output === "string" ? output : JSON.stringify(output))   // {"status":"completed",...}
await client.close()
