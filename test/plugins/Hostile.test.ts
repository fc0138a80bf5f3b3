// Hostile plugins, one test each: every one fails closed with a decision naming the plugin and
// its digest, and the host keeps serving other calls afterwards.
import { describe, expect, it } from "@effect/vitest"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import type { Decision } from "../../runtime/schema/Events.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { Effect, Layer } from "effect"
import { layerHostEnvMemory } from "../../runtime/plugins/HostEnv.js"
import { layerPluginHost, PluginHost } from "../../runtime/plugins/PluginHost.js"
import { layerPluginSourceMemory, type PluginArtifact } from "../../runtime/plugins/PluginSource.js"
import { layerPluginAdjudicator } from "../../runtime/plugins/Pipeline.js"
import { generateKey, signManifest } from "../../runtime/plugins/Signing.js"
import { artifact, devKey, Now, pinOf, pinOf as basePinOf, pipelineLayer, policyWith, proposal } from "./support.js"

const spendLimit = pinOf("spend-limit", { config: { rules: { "payments.transfer": { amount_field: "amount", witness_above: 100, deny_above: 1000 } } } })

/** Adjudicates one call with `hostile` pinned beside spend-limit, then one more call after it. */
const runHostile = (hostile: PluginPin) =>
  Effect.gen(function* () {
    const adj = yield* Adjudicator
    const policy = policyWith([hostile, spendLimit])
    const started = performance.now()
    const first = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 5 }), policy, now: Now })
    const elapsedMs = performance.now() - started
    // The host keeps serving: the same plugins again, and spend-limit alone.
    const again = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 5 }), policy, now: Now })
    const healthy = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 5 }), policy: policyWith([spendLimit]), now: Now })
    return { first, again, healthy, elapsedMs }
  })

const faultOf = (decisions: ReadonlyArray<Decision>, pin: PluginPin): Record<string, unknown> => {
  const d = decisions.find((x) => x.by === `plugin:${pin.name}@${pin.version}`)
  expect(d, `a decision naming ${pin.name}`).toBeDefined()
  expect(d!.digest).toBe(pin.sha256)
  return d!.output as Record<string, unknown>
}

const expectFailClosed = (r: Effect.Effect.Success<ReturnType<typeof runHostile>>, pin: PluginPin, fault: string) => {
  expect(r.first.verdict).toBe("DENY")
  const out = faultOf(r.first.decisions, pin)
  expect(out.fault).toBe(fault)
  expect(out.fallback).toBe("DENY")
  expect(r.first.reasons.some((x) => x.by === `plugin:${pin.name}@${pin.version}` && x.reason.includes(fault))).toBe(true)
  expect(r.again.verdict).toBe("DENY")
  expect(faultOf(r.again.decisions, pin).fault).toBe(fault)
  expect(r.healthy.verdict).toBe("ALLOW")
}

// Each hostile plugin runs both ways: in-process under a fuel budget (the default for plugins
// without async host functions) and in a worker terminated at its time limit.
describe.each(["auto", "worker"] as const)("hostile plugins fail closed (isolation %s)", (isolation) => {
  const pinOf = (name: string, overrides: Partial<PluginPin> = {}) => basePinOf(name, { isolation, ...overrides })
  it.scoped("an infinite loop is stopped by the time limit", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/loop-forever", { timeout_ms: 100 })
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "timeout")
      expect(r.elapsedMs).toBeLessThan(5_000)
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("exponential recursion (calls, no loop) is stopped by the time limit", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/exponential-recursion", { timeout_ms: 100 })
      expectFailClosed(yield* runHostile(pin), pin, "timeout")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a loop of memory.fill over all memory is stopped by the time limit", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/memory-fill-forever", { timeout_ms: 100, memory_max_pages: 64 })
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "timeout")
      expect(r.elapsedMs).toBeLessThan(5_000)
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a memory bomb in linear memory is stopped by the memory limit", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/memory-bomb", { memory_max_pages: 32 })
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "memory_limit")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a memory bomb in host-side blocks is stopped by the same budget", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/host-alloc-bomb", { memory_max_pages: 32 })
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "memory_limit")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a trap takes the fallback", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/trap")
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "trap")
      expect(String(faultOf(r.first.decisions, pin).message)).toContain("boom")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("output that is not JSON takes the fallback", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/garbage-output")
      expectFailClosed(yield* runHostile(pin), pin, "bad_output")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("JSON that is not a stage output takes the fallback", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/wrong-shape-output")
      expectFailClosed(yield* runHostile(pin), pin, "bad_output")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a plugin importing an ungranted host function refuses to load", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/ungranted-import")
      const r = yield* runHostile(pin)
      expectFailClosed(r, pin, "load")
      expect(String(faultOf(r.first.decisions, pin).message)).toMatch(/ungranted_import.*extism:host\/user\/wk_kv_get/)
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a REQUIRE_WITNESS fallback holds instead of denying", () =>
    Effect.gen(function* () {
      const pin = pinOf("fixtures/trap", { fallback: "REQUIRE_WITNESS" })
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 5 }), policy: policyWith([pin, spendLimit]), now: Now })
      expect(r.verdict).toBe("REQUIRE_WITNESS")
      expect(r.contract).toBeDefined()
      expect(faultOf(r.decisions, pin).fallback).toBe("REQUIRE_WITNESS")
    }).pipe(Effect.provide(pipelineLayer()))
  )
})

// Refusals at load time: the store serves bytes or manifests that do not match the pin.

const withStore = (entries: ReadonlyArray<PluginArtifact & { readonly sha256?: string }>) =>
  layerPluginAdjudicator.pipe(
    Layer.provideMerge(Layer.mergeAll(layerPluginHost.pipe(Layer.provide(layerPluginSourceMemory([...entries, artifact("spend-limit")]))), layerHostEnvMemory()))
  )

const good = artifact("fixtures/fixed-verdict")
const allowPin = pinOf("fixtures/fixed-verdict", { config: { verdict: "ALLOW" } })

const refusedWith = (problem: string) =>
  Effect.gen(function* () {
    const r = yield* runHostile(allowPin)
    expectFailClosed(r, allowPin, "load")
    expect(String(faultOf(r.first.decisions, allowPin).message)).toContain(problem)
    const host = yield* PluginHost
    const err = yield* Effect.flip(host.load(allowPin))
    expect(err._tag).toBe("PluginLoadError")
    expect(err.plugin).toBe("fixed-verdict@1.0.0")
    expect(err.problem).toBe(problem)
    return err
  })

describe("plugins that must not load", () => {
  it.scoped("one tampered byte: the digest no longer matches the pin", () =>
    Effect.gen(function* () {
      const err = yield* refusedWith("digest_mismatch")
      expect(err.message).toMatch(/fixed-verdict@1.0.0 .* refused to load: digest_mismatch/)
    }).pipe(
      Effect.provide(
        withStore([
          {
            sha256: good.manifest!.manifest.sha256,
            bytes: (() => {
              const b = new Uint8Array(good.bytes)
              b[b.length - 10] = b[b.length - 10]! ^ 0x01
              return b
            })(),
            manifest: good.manifest
          }
        ])
      )
    )
  )

  it.scoped("unsigned: no signature on the manifest", () =>
    refusedWith("unsigned").pipe(Effect.provide(withStore([{ bytes: good.bytes, manifest: { manifest: good.manifest!.manifest } }])))
  )

  it.scoped("signed by a key the profile does not pin", () =>
    Effect.gen(function* () {
      const err = yield* refusedWith("unknown_signer")
      expect(err.detail).toContain(devKey.public_key)
    }).pipe(Effect.provide(withStore([{ bytes: good.bytes, manifest: signManifest(good.manifest!.manifest, generateKey()) }])))
  )

  it.scoped("a signature that does not verify (manifest edited after signing)", () =>
    refusedWith("bad_signature").pipe(
      Effect.provide(withStore([{ bytes: good.bytes, manifest: { ...good.manifest!, manifest: { ...good.manifest!.manifest, stages: ["adjudicate", "admit"] } } }]))
    )
  )

  it.scoped("a manifest signed for other wasm bytes", () =>
    refusedWith("manifest_mismatch").pipe(
      Effect.provide(withStore([{ bytes: good.bytes, manifest: signManifest({ ...good.manifest!.manifest, sha256: "0".repeat(64) }, devKey) }]))
    )
  )
})
