// The witness-contract plugins, compiled wasm through the pipeline: human-approval (disclosure),
// ci-attestation, peer-review.
import { afterAll, describe, expect, it } from "vitest"
import { pinOf } from "./support.js"
import { pipelineRuntime, stageOf } from "./policySupport.js"

const rt = pipelineRuntime()
afterAll(() => rt.dispose())

// transfer-limit makes money_transfer over 1000 REQUIRE_WITNESS (no contract of its own).
const limit = pinOf("transfer-limit", { config: { witness_above: 1000, deny_above: 100_000 } })
const human = pinOf("human-approval", { config: { tools: ["money_transfer"], local_class: "human", remote_class: "human-remote", keep_fields: ["amount"] } })
// Plugins see the input as JCS, keys sorted: summaries list fields in that order.
const Args = { amount: 5000, from: "acct-123", memo: "rent", to: "acct-987" }

describe("human-approval", () => {
  it("exact disclosure: a local approver, shown the exact arguments", async () => {
    const r = await rt.adjudicate([limit, human], "money_transfer", Args, { disclosure: "exact" })
    expect(r.verdict).toBe("REQUIRE_WITNESS")
    const summary = `money_transfer ${JSON.stringify(Args)} proposed by alice`
    expect(r.contract).toEqual({ rule: { class: "human" }, summary })
    expect(r.presentation).toEqual({ disclosure: "exact", summary, args: Args })
    // The provider saw the preference in its input.
    const d = r.decisions.find((x) => stageOf(x) === "witness_contract")!
    expect((d.output as { input: { disclosure?: string } }).input.disclosure).toBe("exact")
  })

  it("redacted disclosure: a local or remote approver, shown masked values (kept fields stay)", async () => {
    const r = await rt.adjudicate([limit, human], "money_transfer", Args, { disclosure: "redacted" })
    const summary = "money_transfer proposed by alice (fields: amount 5000, from, memo, to; other values redacted)"
    expect(r.contract).toEqual({ rule: { any: [{ class: "human" }, { class: "human-remote" }] }, summary })
    expect(r.presentation).toEqual({ disclosure: "redacted", summary, args: { amount: 5000, from: "[redacted text]", memo: "[redacted text]", to: "[redacted text]" } })
    for (const secret of ["acct-123", "acct-987", "rent"]) expect(JSON.stringify({ c: r.contract, p: r.presentation })).not.toContain(secret)
  })

  it("no preference: the configured default, redacted unless set", async () => {
    const r = await rt.adjudicate([limit, human], "money_transfer", Args)
    expect((r.presentation as { disclosure: string }).disclosure).toBe("redacted")
    const exactDefault = pinOf("human-approval", { config: { tools: ["money_transfer"], default_disclosure: "exact" } })
    expect(((await rt.adjudicate([limit, exactDefault], "money_transfer", Args)).presentation as { disclosure: string }).disclosure).toBe("exact")
  })

  it("a fallback after a timeout denies; an allowed call carries no presentation", async () => {
    const withFallback = pinOf("human-approval", { config: { tools: ["money_transfer"], fallback_after_ms: 60_000 } })
    expect((await rt.adjudicate([limit, withFallback], "money_transfer", Args)).contract?.fallback).toEqual({ after_ms: 60_000, action: "deny" })
    const small = await rt.adjudicate([limit, human], "money_transfer", { ...Args, amount: 5 }, { disclosure: "exact" })
    expect(small.verdict).toBe("ALLOW")
    expect(small.presentation).toBeUndefined()
  })
})

const ci = pinOf("ci-attestation", { config: { tools: ["deploy"], principal: "ci:build", status: "success" } })
const Commit = "3f786850e387550fdab836ed7e6dc881de23001b"

describe("ci-attestation", () => {
  it("a deploy of a commit digest waits for the CI principal to attest that commit's status", async () => {
    const r = await rt.adjudicate([ci], "deploy", { service: "api", commit: Commit })
    expect(r.verdict).toBe("REQUIRE_WITNESS")
    expect(r.reasons).toEqual([{ by: "plugin:ci-attestation@1.0.0", reason: `deploy of ${Commit} needs CI status 'success'` }])
    expect(r.contract).toEqual({ rule: { principal: "ci:build" }, summary: `CI status 'success' for commit ${Commit}` })
  })

  it("a commit that is not a digest is denied naming the field; a class can stand for the principal", async () => {
    expect(await rt.adjudicate([ci], "deploy", { commit: "main" })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "argument 'commit' must be a commit digest (40 or 64 lowercase hex)" }] })
    const byClass = pinOf("ci-attestation", { config: { tools: ["deploy"] } })
    expect((await rt.adjudicate([byClass], "deploy", { commit: Commit })).contract?.rule).toEqual({ class: "ci" })
  })
})

const review = pinOf("peer-review", { config: { tools: ["merge_pr"], class: "peer-reviewer" } })

describe("peer-review", () => {
  it("a merge needs a reviewer-class agent; the summary names the proposer", async () => {
    const r = await rt.adjudicate([review], "merge_pr", { repo: "wk", pr: 7 })
    expect(r.verdict).toBe("REQUIRE_WITNESS")
    expect(r.contract).toEqual({ rule: { class: "peer-reviewer" }, summary: 'peer review of merge_pr {"pr":7,"repo":"wk"} proposed by alice' })
  })

  it("joined with another provider, both must hold", async () => {
    const r = await rt.adjudicate([review, ci], "merge_pr", { repo: "wk", pr: 7 })
    expect(r.contract?.rule).toEqual({ class: "peer-reviewer" })
    const both = await rt.adjudicate([pinOf("peer-review", { config: { tools: ["deploy"] } }), ci], "deploy", { commit: Commit })
    expect(both.contract?.rule).toEqual({ all: [{ class: "peer-reviewer" }, { principal: "ci:build" }] })
  })
})
