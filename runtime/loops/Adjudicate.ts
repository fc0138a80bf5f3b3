import { Effect } from "effect"
import { EventIds } from "../heldcall/EventIds.js"
import type { LedgerError } from "../schema/LedgerError.js"
import { Outbox } from "../ledger/Outbox.js"
import { wake, type Wakes } from "../ledger/Wakes.js"
import { watchSession, type PresenceMarks } from "../ledger/PresenceMarks.js"
import type { Adjudication } from "../policy/Adjudicator.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { decideCall } from "../policy/CallDecision.js"
import { effectivePreferences, redactArgs } from "../policy/Preferences.js"
import { summaryOf, templateFor } from "../policy/PresentationTemplate.js"
import { callDigest, contractDigest, jcsDigest } from "../schema/Canonical.js"
import type { CallAdjudicated, CallDenied, CallHeld, CallRepresented, HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { JsonObject } from "../schema/Json.js"
import { foldUncommitted } from "../heldcall/Reducer.js"
import { registryOf } from "../policy/ActivePolicy.js"
import { eventOf } from "./Actions.js"
import { standingApprovals } from "./StandingApprovals.js"

/** The kernel's decision on a call's spec (runtime/policy/CallDecision.ts). */
export const decide = (facts: HeldCallFacts, policy: ActivePolicy, now: number) => decideCall(facts.spec!, policy, now)

/**
 * A verdict to record: its events, and what follows once they are committed (a parked call's
 * wake, its presence mark, the witness request). Nothing here leaves the process.
 */
export interface Adjudicated {
  readonly events: ReadonlyArray<HeldEvent>
  /** Runs after the events are durable; null when nothing follows. */
  readonly committed: Effect.Effect<void, LedgerError, Wakes | PresenceMarks | Outbox> | null
}

/**
 * The `adjudicate` action, in memory: the verdict for the current generation and policy epoch
 * as events (the plugins run in this process). The driver commits them with the events that
 * precede and follow them up to the next I/O, then runs `committed`.
 */
export const adjudicate = (f: HeldCallFacts, policy: ActivePolicy) =>
  Effect.gen(function* () {
    const now = Date.now()
    const a = yield* decide(f, policy, now)
    const spec = f.spec!
    const executedDigest = callDigest(a.executed.tool, a.executed.args)
    const transformed = executedDigest !== spec.call_digest
    // A generation presents one canonical call. When a re-adjudication changes it (a policy change
    // made a transform produce another call), the proposal is re-presented as the next generation:
    // witnesses are shown the new call, and no evidence about the old one can count.
    const represent = f.executed !== null && f.executed.call_digest !== executedDigest
    const generation = represent ? f.generation + 1 : f.generation
    const base = { held_id: f.held_id, generation }
    const digest = a.contract ? contractDigest(a.contract) : undefined
    const events: Array<HeldEvent> = []
    if (represent) {
      events.push(
        eventOf<typeof CallRepresented.Type>({
          ...base,
          type: "call.represented",
          event_id: EventIds.represented(f.held_id, generation),
          from_call_digest: f.executed!.call_digest,
          call_digest: executedDigest,
          policy_epoch: policy.epoch
        })
      )
    }
    events.push(
      eventOf<typeof CallAdjudicated.Type>({
        ...base,
        type: "call.adjudicated",
        event_id: EventIds.adjudicated(f.held_id, generation, policy.epoch),
        verdict: a.verdict,
        reasons: a.reasons,
        policy_epoch: policy.epoch,
        ...(a.contract ? { witness_contract: a.contract, contract_digest: digest } : {}),
        ...(transformed ? { executed: { tool: a.executed.tool, args: a.executed.args, call_digest: executedDigest } } : {}),
        decisions: a.decisions
      })
    )
    if (a.verdict === "REQUIRE_WITNESS" && a.contract) {
      const disclosure = effectivePreferences(policy, spec.principal, spec.preferences).disclosure ?? "exact"
      const presentation = presentationOf(f, generation, a, executedDigest, disclosure, templateFor(policy.profiles, a.executed.tool))
      const presentationDigest = jcsDigest(presentation)
      // Witnesses are shown the call again whenever what they would be shown changed.
      if (represent || !f.held || f.contract_digest !== digest || f.witness_request?.presentation_digest !== presentationDigest) {
        events.push(
          eventOf<typeof CallHeld.Type>({
            ...base,
            type: "call.held",
            event_id: EventIds.held(f.held_id, generation, digest!, presentationDigest),
            witness_request: { contract: a.contract, contract_digest: digest!, presentation, presentation_digest: presentationDigest },
            expires_at: spec.expires_at
          })
        )
      }
    }
    if (a.verdict === "DENY") {
      events.push(eventOf<typeof CallDenied.Type>({ ...base, type: "call.denied", event_id: EventIds.denied(f.held_id, generation), reasons: a.reasons }))
    }
    const held = events.find((e): e is typeof CallHeld.Type => e.type === "call.held")
    if (held === undefined) return { events, committed: null } satisfies Adjudicated as Adjudicated
    // A standing approval that covers the call is its witness's approval from the hold on.
    events.push(...(yield* standingApprovals(foldUncommitted(f, events), registryOf(policy), now)))
    const watch = effectivePreferences(policy, spec.principal, spec.preferences).cancel_on_disconnect === true
    const committed = Effect.gen(function* () {
      // The parked call's timers (expiry, fallback) live in its wake.
      yield* wake(f.held_id)
      if (watch) yield* watchSession(f.held_id, spec.session_id)
      // Witness routes listen here; the request is a notification, the held call is the truth.
      yield* (yield* Outbox).requestWitnesses(f.held_id, { held_id: f.held_id, generation, expires_at: held.expires_at, witness_request: held.witness_request })
    })
    return { events, committed } satisfies Adjudicated as Adjudicated
  })

/**
 * What a witness is shown: the canonical call it binds to. The preference's disclosure and a
 * witness-contract provider's presentation combine, and the more private one wins: with
 * `redacted` the arguments are the provider's summary or every value replaced by its type.
 * The digests still bind the witness to the exact call. The summary is a plugin's, else the
 * profile's template for the tool, else one made from the arguments; the contract's summary
 * describes the rule, not the call (runtime/policy/PresentationTemplate.ts).
 */
const presentationOf = (f: HeldCallFacts, generation: number, a: Adjudication, digest: string, preferred: "exact" | "redacted", template: string | undefined): JsonObject => {
  const call = a.executed
  const provider = a.presentation
  const redacted = preferred === "redacted" || provider?.["disclosure"] === "redacted"
  const providerArgs = provider?.["disclosure"] === "redacted" && typeof provider["args"] === "object" && provider["args"] !== null && !Array.isArray(provider["args"]) ? (provider["args"] as JsonObject) : undefined
  const summary = summaryOf({
    tool: call.tool,
    args: call.args,
    redacted,
    providerSummary: typeof provider?.["summary"] === "string" ? provider["summary"] : undefined,
    template
  })
  return {
    principal: f.spec!.principal,
    tool: call.tool,
    args: redacted ? (providerArgs ?? redactArgs(call.args)) : call.args,
    disclosure: redacted ? "redacted" : "exact",
    call_digest: digest,
    generation,
    ...(call.tool !== f.spec!.tool || digest !== f.spec!.call_digest ? { proposed: { tool: f.spec!.tool, call_digest: f.spec!.call_digest } } : {}),
    summary
  }
}
