// The host: what a pin may grant, compile-once, and serving calls concurrently.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { PluginHost } from "../../runtime/plugins/PluginHost.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { hostLayer, Now, pinOf, pipelineLayer, policyWith, proposal } from "./support.js"

const refused = (pin: PluginPin, problem: string, detail: RegExp) =>
  Effect.gen(function* () {
    const host = yield* PluginHost
    const err = yield* Effect.flip(host.load(pin))
    expect(err.problem).toBe(problem)
    expect(err.detail).toMatch(detail)
    expect(err.plugin).toBe(`${pin.name}@${pin.version}`)
  })

describe("PluginHost", () => {
  it.scoped("a pin may grant only what the signed manifest declares", () =>
    Effect.gen(function* () {
      yield* refused(pinOf("spend-limit", { stages: ["adjudicate", "admit"] }), "stage_not_declared", /grants stage 'admit'/)
      yield* refused(pinOf("spend-limit", { capabilities: { host_functions: ["kv"], kv_prefix: "x/" } }), "capability_not_requested", /grants 'kv'/)
      yield* refused(pinOf("daily-cap", { capabilities: { host_functions: ["kv", "counter"], kv_prefix: "limits/", counters: ["spent_today"] } }), "capability_not_requested", /kv prefix 'limits\/'/)
      yield* refused(pinOf("daily-cap", { capabilities: { host_functions: ["kv", "counter"], kv_prefix: "limits/daily/", counters: ["spent_week"] } }), "capability_not_requested", /counter 'spent_week'/)
      yield* refused(pinOf("audit-log", { egress: "none" }), "egress_exceeds", /egress 'kernel'/)
      yield* refused(pinOf("spend-limit", { version: "1.0.1" }), "manifest_mismatch", /spend-limit@1.0.0/)
    }).pipe(Effect.provide(hostLayer()))
  )

  it.scoped("a plugin whose code calls a function the pin does not grant cannot load, even if requested", () =>
    Effect.gen(function* () {
      // daily-cap imports wk_kv_get and wk_counter; granting only the counter must refuse it.
      yield* refused(pinOf("daily-cap", { capabilities: { host_functions: ["counter"], counters: ["spent_today"] } }), "ungranted_import", /extism:host\/user\/wk_kv_get/)
    }).pipe(Effect.provide(hostLayer()))
  )

  it.scoped("compiles once per digest and reuses the loaded plugin across pins that differ only in config", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const a = yield* host.load(pinOf("fixtures/fixed-verdict", { config: { verdict: "ALLOW" } }))
      const b = yield* host.load(pinOf("fixtures/fixed-verdict", { config: { verdict: "DENY" } }))
      expect(a.runner).toBe(b.runner)
      expect(b.pin.config).toEqual({ verdict: "DENY" })
      const c = yield* host.load(pinOf("fixtures/fixed-verdict", { memory_max_pages: 8 }))
      expect(c.runner).not.toBe(a.runner)
    }).pipe(Effect.provide(hostLayer()))
  )

  it.scoped("runs in-process under fuel unless the plugin needs async host functions or the pin asks for a worker", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      expect((yield* host.load(pinOf("spend-limit"))).isolation).toBe("metered")
      expect((yield* host.load(pinOf("spend-limit", { isolation: "worker" }))).isolation).toBe("worker")
      expect((yield* host.load(pinOf("daily-cap"))).isolation).toBe("worker")
    }).pipe(Effect.provide(hostLayer()))
  )

  it.scoped("serves many concurrent adjudications, with a hostile plugin timing out among them", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const spendLimit = pinOf("spend-limit", { config: { rules: { "payments.transfer": { amount_field: "amount", witness_above: 100 } } } })
      const loop = pinOf("fixtures/loop-forever", { timeout_ms: 50 })
      const calls = Array.from({ length: 60 }, (_, i) => ({ amount: i * 5, hostile: i % 20 === 7 }))
      const results = yield* Effect.forEach(
        calls,
        (c) => adj.adjudicate({ proposal: proposal("payments.transfer", { amount: c.amount }), policy: policyWith(c.hostile ? [spendLimit, loop] : [spendLimit]), now: Now }),
        { concurrency: 16 }
      )
      results.forEach((r, i) => expect(r.verdict).toBe(calls[i]!.hostile ? "DENY" : calls[i]!.amount > 100 ? "REQUIRE_WITNESS" : "ALLOW"))
    }).pipe(Effect.provide(pipelineLayer()))
  )
})
