import { describe, expect, it } from "vitest"
import { canonicalSplitAt } from "../../runtime/audit/checks/PluginRerun.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"

// The admission re-run searches the kernel clock one millisecond at a time: the input's JCS is
// made once around the clock's number, and must equal canonicalize of the whole input for each.
describe("canonicalSplitAt", () => {
  const inputs: ReadonlyArray<Record<string, unknown>> = [
    { stage: "admit", principal: "agent:alice", tool: "money_transfer", args: { to: "b", from: "a1", amount: 10 }, result: { ok: true, n: [1, 2.5, "x"] }, config: {} },
    { stage: "admit", result: null },
    {},
    { "né": 1, "z": { now: 3 }, "nov": "é", "no": [], "nowhere": true, "NOW": 0, "\u00e9": "x", "a\u0000": 1 },
    { skipped: undefined, kept: 1 }
  ]
  it("gives the text canonicalize gives, for every clock value and member order", () => {
    for (const base of inputs) {
      const [head, tail] = canonicalSplitAt(base, "now")
      for (const now of [0, 1, 1765000000000, 1765000000123]) expect(`${head}${now}${tail}`).toBe(canonicalize({ ...base, now }))
    }
  })
})
