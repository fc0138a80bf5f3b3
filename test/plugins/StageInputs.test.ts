// The stage input text the kernel sends (and the auditor re-derives) is exactly the JCS of the stage input.
import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import type { Decision } from "../../runtime/schema/Events.js"
import type { JsonObject, JsonValue } from "../../runtime/schema/Json.js"
import { adjudicateInputText, callText, canonicalCall, configText, deriveAdjudicationInputs, proposalText, transformInputText } from "../../runtime/plugins/StageInputs.js"

const ids = { principal: "agent:alice", session_id: "s1", turn_id: "t1", call_id: "c1" }
const json: fc.Arbitrary<JsonValue> = fc.jsonValue() as fc.Arbitrary<JsonValue>
const object: fc.Arbitrary<JsonObject> = fc.dictionary(fc.string(), json) as fc.Arbitrary<JsonObject>

describe("stage input text", () => {
  it("is the JCS of the transform and adjudicate inputs, for any arguments, config, ids and clock", () => {
    fc.assert(
      fc.property(object, json, fc.string(), fc.record({ principal: fc.string(), session_id: fc.string(), turn_id: fc.string(), call_id: fc.string() }), fc.nat(), fc.nat(9), (args, config, tool, p, now, depth) => {
        const call = canonicalCall(tool, args)
        const proposal = { ...p, tool, args }
        expect(proposalText(p, call)).toBe(canonicalize(proposal))
        expect(callText(call)).toBe(canonicalize({ tool, args }))
        expect(transformInputText(proposalText(p, call), depth, configText(config), now)).toBe(canonicalize({ stage: "transform", proposal, depth, config, now }))
        expect(adjudicateInputText(proposalText(p, call), configText(config), now)).toBe(canonicalize({ stage: "adjudicate", proposal, config, now }))
      }),
      { numRuns: 300 }
    )
  })

  it("re-derives each decision's input through a transform chain: a replacement is the call the next stages see, one deeper", () => {
    const decisions: Array<Decision> = [
      { by: "plugin:canon@1", digest: "a", input_digest: "x", output: { stage: "transform", result: { action: "replace", tool: "fs_write", args: { path: "/ws/a" }, reason: "canonical" } } },
      { by: "plugin:canon@1", digest: "a", input_digest: "x", output: { stage: "transform", result: { action: "keep" } } },
      { by: "plugin:other@1", digest: "b", output: { stage: "transform", scope: "not_in_scope", tool: "fs_write" } },
      { by: "kernel:rules", output: "ALLOW" },
      { by: "plugin:judge@1", digest: "c", input_digest: "y", output: { stage: "adjudicate", result: { verdict: "ALLOW" } } }
    ]
    const configs: Record<string, JsonValue> = { "plugin:canon@1": { workspace: "/ws" }, "plugin:judge@1": { limit: 3 } }
    const derived = deriveAdjudicationInputs(ids, { tool: "fs_write", args: { path: "/ws/./a" } }, decisions, (d) => configs[d.by])
    const at = (i: number, now: number) => {
      const x = derived[i]!
      if (x.kind !== "derived") throw new Error(`decision ${i} is ${x.kind}`)
      return JSON.parse(x.text(now)) as unknown
    }
    expect(at(0, 5)).toEqual({ stage: "transform", proposal: { ...ids, tool: "fs_write", args: { path: "/ws/./a" } }, depth: 0, config: { workspace: "/ws" }, now: 5 })
    expect(at(1, 5)).toEqual({ stage: "transform", proposal: { ...ids, tool: "fs_write", args: { path: "/ws/a" } }, depth: 1, config: { workspace: "/ws" }, now: 5 })
    expect(derived[2]).toEqual({ kind: "not_in_scope", tool: "fs_write" })
    expect(derived[3]).toEqual({ kind: "recorded" })
    expect(at(4, 7)).toEqual({ stage: "adjudicate", proposal: { ...ids, tool: "fs_write", args: { path: "/ws/a" } }, config: { limit: 3 }, now: 7 })
  })
})
