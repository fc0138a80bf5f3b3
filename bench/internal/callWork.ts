// The work a call of the bench profile cannot skip, however a kernel is written, as plain code.
// An ALLOW: the request parsed, its ed25519 signature checked and its payload decoded; the call's
// digest; the profile's plugin stages in scope for the call's tool as bare in-process Extism calls of their fuel-metered
// wasm (JCS and sha256 of each input, each output parsed and decoded with the stage's schema); the
// call's two commits encoded and chained, stage records included. A held call's release: the
// witness's attestation parsed, checked and decoded, bound to the held call; the commit it
// releases; the admission stage and the second commit; the delivery to the session. The budget
// suite times the ALLOW's in process; the durable floor's work subjects do both around the
// floor's own durable exchanges.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import createPlugin, { type Plugin } from "@extism/extism"
import { Either, Schema } from "effect"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { FuelExport, meterModule } from "../../runtime/plugins/internal/wasmMeter.js"
import { AdjudicateOutput, AdmitOutput, TransformOutput } from "../../runtime/schema/StageIO.js"
import { canonicalize, sha256Hex } from "../../runtime/schema/Canonical.js"
import { adjudicateInputText, callText, canonicalCall, configText, proposalText, transformInputText, type CanonicalCall } from "../../runtime/plugins/StageInputs.js"
import { chainCommit, commitDigest, encodeCommit, type Commit } from "../../runtime/schema/Commit.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import { envelopeSignatureValid } from "../../runtime/schema/EnvelopeSignature.js"
import type { JsonObject, JsonValue } from "../../runtime/schema/Json.js"
import { pinAppliesTo, resolvePin, type PluginPin } from "../../runtime/schema/PluginPin.js"
import { AttestPayload, ProposePayload } from "../../runtime/schema/Requests.js"
import { benchProfile } from "../BenchProfile.js"

/** The module's name in the Extism manifest: a call naming it skips listing every module's exports (as the kernel's runner does). */
const PluginModule = "plugin"
const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** A proposal that passed: its envelope, its decoded payload, its call with the arguments' JCS text, and its call digest. */
export interface Accepted {
  readonly envelope: Envelope
  readonly payload: typeof ProposePayload.Type
  readonly call: CanonicalCall
  readonly callDigest: string
}

/** One plugin stage's record, as commit A or B carries it. */
export interface StageRecord {
  readonly stage: string
  readonly inputDigest?: string
  readonly output?: unknown
  /** Set when the pin does not apply to the call's tool: the tool it was not run for. */
  readonly notInScope?: string
}

/** An attestation that passed: its envelope and decoded payload. */
export interface Attested {
  readonly envelope: Envelope
  readonly payload: typeof AttestPayload.Type
}

/** What an attestation binds to: the held call's digests. */
export interface HeldDigests {
  readonly callDigest: string
  readonly contractDigest: string
}

export interface CallWork {
  /** Parses the request, checks its signature and decodes its payload; throws on a bad one. */
  readonly accept: (request: Uint8Array) => Accepted
  /** The transform, then both adjudicators (handed over together, as the kernel does). */
  readonly adjudicate: (call: Accepted, now: number) => Promise<Array<StageRecord>>
  /** The admission stage on the tool's result of `call`. */
  readonly admit: (call: { readonly principal: string; readonly tool: string; readonly args: unknown }, result: JsonValue, now: number) => Promise<StageRecord>
  /** Commit A (proposal, verdict with its stage records, claim, dispatch), encoded, on `prev`. */
  readonly commitA: (heldId: string, call: Accepted, stages: ReadonlyArray<StageRecord>, prev: string, now: number) => Uint8Array
  /** Commit B (effect, admission with its stage record), encoded, chained on commit A's bytes. */
  readonly commitB: (heldId: string, result: JsonValue, admitted: StageRecord, a: Uint8Array, now: number) => Uint8Array
  /**
   * Parses an attestation, checks its signature, decodes its payload and binds it to the held call
   * it names (`heldCall` gives that call's digests); throws on a bad one or an unknown call.
   */
  readonly acceptAttestation: (request: Uint8Array, heldCall: (heldId: string) => HeldDigests | undefined) => Attested
  /** The release's commit A (the attestation accepted, readiness, claim, dispatch), encoded, on `prev`. */
  readonly releaseCommitA: (heldId: string, attested: Attested, prev: string, now: number) => Uint8Array
  /** The delivery of a released call's admitted result to its session, encoded. */
  readonly delivery: (heldId: string, result: JsonValue, now: number) => Uint8Array
  readonly close: () => Promise<void>
}

/** One stage of the bench profile on its plugin's metered wasm; calls to one plugin run one at a time. */
interface StageRunner {
  readonly stage: string
  readonly pin: PluginPin
  /** JCS text of the pin's config, once. */
  readonly config: string
  readonly run: (text: string) => Promise<unknown>
}

const outputSchemas: Record<string, Schema.Schema<unknown, unknown>> = {
  transform: TransformOutput as unknown as Schema.Schema<unknown, unknown>,
  adjudicate: AdjudicateOutput as unknown as Schema.Schema<unknown, unknown>,
  admit: AdmitOutput as unknown as Schema.Schema<unknown, unknown>
}

const stageRunners = async (): Promise<{ runners: Array<StageRunner>; plugins: Array<Plugin> }> => {
  const runners: Array<StageRunner> = []
  const plugins: Array<Plugin> = []
  for (const pin of benchProfile().plugins ?? []) {
    const bytes = new Uint8Array(readFileSync(join(repoRoot, "plugins", pin.name, "plugin.wasm")))
    const metered = meterModule(bytes)
    if (!metered.ok) throw new Error(`${pin.name}: ${metered.detail}`)
    const module = await WebAssembly.compile(new Uint8Array(metered.bytes))
    const plugin = await createPlugin({ wasm: [{ module, name: PluginModule }] }, { useWasi: false })
    plugins.push(plugin)
    const fuel = (await plugin.getInstance(PluginModule)).exports[FuelExport] as WebAssembly.Global
    let last: Promise<unknown> = Promise.resolve()
    for (const stage of pin.stages) {
      const decode = Schema.decodeUnknownEither(outputSchemas[stage]!, { onExcessProperty: "error" })
      const once = async (text: string) => {
        fuel.value = 1_000_000_000n
        const out = await plugin.call([PluginModule, stage], encoder.encode(text))
        await plugin.reset()
        const decoded = decode(JSON.parse(out!.text()))
        if (Either.isLeft(decoded)) throw new Error(`${pin.name} ${stage}: ${decoded.left.message}`)
        return decoded.right
      }
      const run = (text: string) => {
        const next = last.then(() => once(text), () => once(text))
        last = next
        return next
      }
      runners.push({ stage, pin, config: configText(resolvePin(pin).config), run })
    }
  }
  return { runners, plugins }
}

export const loadCallWork = async (): Promise<CallWork> => {
  const { runners, plugins } = await stageRunners()
  const of = (stage: string) => runners.filter((r) => r.stage === stage)
  const [transform, adjudicators, admission] = [of("transform"), of("adjudicate"), of("admit")]

  /** Runs a stage on its input's JCS text (built from parts canonicalized once, as the kernel does). */
  const start = (r: StageRunner, text: string): Promise<StageRecord> => {
    const inputDigest = sha256Hex(text)
    return r.run(text).then((output) => ({ stage: r.stage, inputDigest, output }))
  }

  /** A signed request parsed, its signature checked and its payload decoded with `decode`; throws on a bad one. */
  const signed = <P>(request: Uint8Array, decode: (payload: unknown) => P): { readonly envelope: Envelope; readonly payload: P } => {
    const envelope = JSON.parse(decoder.decode(request)) as Envelope
    if (!envelopeSignatureValid(envelope)) throw new Error("bad signature")
    return { envelope, payload: decode(envelope.payload) }
  }
  const decodeProposal = Schema.decodeUnknownSync(ProposePayload, { onExcessProperty: "ignore" })
  const decodeAttestation = Schema.decodeUnknownSync(AttestPayload, { onExcessProperty: "ignore" })

  const accept = (request: Uint8Array): Accepted => {
    const { envelope, payload } = signed(request, decodeProposal)
    const call = canonicalCall(payload.tool, payload.args as JsonObject)
    return { envelope, payload, call, callDigest: sha256Hex(callText(call)) }
  }

  const adjudicate = async (c: Accepted, now: number): Promise<Array<StageRecord>> => {
    const p = c.payload
    // The arguments are canonicalized once (the call digest and every stage input reuse the text).
    const proposal = proposalText(p, c.call)
    const records: Array<StageRecord> = []
    // A pin scoped to other tools is not run, only recorded (as the kernel records it).
    for (const r of transform) records.push(pinAppliesTo(r.pin, p.tool) ? await start(r, transformInputText(proposal, 0, r.config, now)) : { stage: r.stage, notInScope: p.tool })
    const running = adjudicators.map((r) => (pinAppliesTo(r.pin, p.tool) ? start(r, adjudicateInputText(proposal, r.config, now)) : Promise.resolve<StageRecord>({ stage: r.stage, notInScope: p.tool })))
    for (const x of running) records.push(await x)
    return records
  }

  const admit = async (p: { readonly principal: string; readonly tool: string; readonly args: unknown }, result: JsonValue, now: number): Promise<StageRecord> => {
    const r = admission[0]!
    return start(r, canonicalize({ stage: "admit", principal: p.principal, tool: p.tool, args: p.args as JsonObject, result, config: JSON.parse(r.config) as JsonValue, now }))
  }

  // Input digests, not copies: the auditor re-derives each input from the proposal (StageInputs.ts).
  const decisionOf = (s: StageRecord) =>
    s.notInScope !== undefined
      ? { by: "plugin:bench@1.0.0", digest: "0".repeat(64), output: { stage: s.stage, scope: "not_in_scope", tool: s.notInScope } }
      : { by: "plugin:bench@1.0.0", digest: "0".repeat(64), input_digest: s.inputDigest, output: { stage: s.stage, result: s.output } }

  /** The fields every event of the call's first generation carries at `now`. */
  const baseOf = (heldId: string, now: number) => ({ held_id: heldId, generation: 1, at: new Date(now).toISOString() })
  /** One commit of `events` (its id the first event's), chained on `prev`, as stored. */
  const encoded = <E extends { readonly event_id: string }>(heldId: string, events: ReadonlyArray<E>, prev: string): Uint8Array =>
    encodeCommit(chainCommit({ commit_id: events[0]!.event_id, held_id: heldId, prev: "", events } as unknown as Commit, prev, undefined))
  /** The claim that ends a commit A: the execution lease and the dispatch under the call's key. */
  const claimed = (heldId: string, now: number) => {
    const base = baseOf(heldId, now)
    return [
      { ...base, type: "execution.leased", event_id: `execution.leased:${heldId}:g1:a1`, owner: "bench-floor", lease_until: base.at },
      { ...base, type: "effect.dispatched", event_id: `effect.dispatched:${heldId}:g1:a1`, idempotency_key: `${heldId}:g1`, attempt: 1, owner: "bench-floor", lease_until: base.at, policy_epoch: 1 }
    ]
  }

  const commitA = (heldId: string, c: Accepted, stages: ReadonlyArray<StageRecord>, prev: string, now: number): Uint8Array => {
    const base = baseOf(heldId, now)
    const p = c.payload
    return encoded(heldId, [
      { ...base, type: "call.proposed", event_id: `call.proposed:${heldId}:g1`, principal: p.principal, session_id: p.session_id, turn_id: p.turn_id, call_id: p.call_id, tool: p.tool, args: p.args, call_digest: c.callDigest, idempotency_key: `${heldId}:g1`, held_id_salt: "0".repeat(64), created_at: base.at, expires_at: p.expires_at ?? base.at, envelope: c.envelope },
      { ...base, type: "call.adjudicated", event_id: `call.adjudicated:${heldId}:g1:e1`, verdict: "ALLOW", reasons: [], policy_epoch: 1, decisions: stages.map(decisionOf) },
      ...claimed(heldId, now)
    ], prev)
  }

  const commitB = (heldId: string, result: JsonValue, admitted: StageRecord, a: Uint8Array, now: number): Uint8Array => {
    const base = baseOf(heldId, now)
    return encoded(heldId, [
      { ...base, type: "effect.recorded", event_id: `effect.recorded:${heldId}:g1:a1`, attempt: 1, ok: true, result },
      { ...base, type: "result.admitted", event_id: `result.admitted:${heldId}:g1:a1`, decisions: [decisionOf(admitted)] }
    ], commitDigest(a))
  }

  const acceptAttestation = (request: Uint8Array, heldCall: (heldId: string) => HeldDigests | undefined): Attested => {
    const { envelope, payload } = signed(request, decodeAttestation)
    const held = heldCall(payload.held_id)
    if (held === undefined) throw new Error(`no held call ${payload.held_id}`)
    if (payload.call_digest !== held.callDigest || payload.contract_digest !== held.contractDigest) throw new Error("the attestation binds another call")
    return { envelope, payload }
  }

  const releaseCommitA = (heldId: string, attested: Attested, prev: string, now: number): Uint8Array => {
    const base = baseOf(heldId, now)
    const p = attested.payload
    return encoded(heldId, [
      { ...base, type: "attestation.accepted", event_id: `attestation.accepted:${heldId}:${p.nonce}`, principal: p.principal, class: p.class, decision: p.decision, call_digest: p.call_digest, contract_digest: p.contract_digest, attestation_digest: sha256Hex(canonicalize(attested.envelope)), envelope: attested.envelope },
      { ...base, type: "call.ready", event_id: `call.ready:${heldId}:g1` },
      ...claimed(heldId, now)
    ], prev)
  }

  const delivery = (heldId: string, result: JsonValue, now: number): Uint8Array =>
    encoder.encode(JSON.stringify({ held_id: heldId, delivery_id: `${heldId}:g1`, generation: 1, outcome: "completed", result, delivered_at: new Date(now).toISOString() }))

  return { accept, adjudicate, admit, commitA, commitB, acceptAttestation, releaseCommitA, delivery, close: async () => void (await Promise.all(plugins.map((p) => p.close().catch(() => undefined)))) }
}
