// Vercel AI SDK: a money_transfer tool whose execute goes through the kernel. The model here is
// the SDK's test model, which asks for one transfer; any model works the same way.
import { generateText } from "ai"
import { MockLanguageModelV2 } from "ai/test"
import { z } from "zod"
import { governedTool, heldResultTool } from "witness-kernel/ai"
import { connectAlice, transfer } from "./client.mjs"

const client = await connectAlice()
const tools = {
  money_transfer: governedTool({
    client, tool: "money_transfer", description: "move money",
    inputSchema: z.object({ from: z.string(), to: z.string(), amount: z.number() }),
    sessionId: "alice.ai", waitMs: 0
  }),
  // A later turn asks for a held call's result by its held_id.
  wk_result: heldResultTool({ client, sessionId: "alice.ai" })
}
const model = new MockLanguageModelV2({
  doGenerate: async () => ({
    content: [{ type: "tool-call", toolCallId: `call-${Date.now()}`, toolName: "money_transfer", input: JSON.stringify(transfer) }],
    finishReason: "tool-calls", usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, warnings: []
  })
})
const { toolResults } = await generateText({ model, tools, prompt: "pay bob 250" })
console.log(JSON.stringify(toolResults[0].output))   // {"status":"completed","held_id":"h_...","result":{...}}
await client.close()
