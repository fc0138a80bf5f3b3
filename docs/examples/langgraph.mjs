// LangGraph JS: a node whose tool call goes through the kernel; a held call interrupts the graph
// with {held_id, summary}, and every resume asks the kernel again.
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph"
import { governedStep } from "witness-kernel/langgraph"
import { connectAlice, transfer } from "./client.mjs"

const client = await connectAlice()
const State = Annotation.Root({ outcome: Annotation() })
const graph = new StateGraph(State)
  .addNode("pay", async (_state, config) => ({
    outcome: await governedStep(client, { session_id: "alice.graph", turn_id: config.configurable.thread_id, call_id: "pay-bob" }, "money_transfer", transfer)
  }))
  .addEdge(START, "pay")
  .addEdge("pay", END)
  .compile({ checkpointer: new MemorySaver() })
const out = await graph.invoke({ outcome: null }, { configurable: { thread_id: `t-${Date.now()}` } })
console.log(JSON.stringify(out.__interrupt__?.[0]?.value ?? out.outcome))   // {"status":"completed",...} or {held_id, summary}
await client.close()
