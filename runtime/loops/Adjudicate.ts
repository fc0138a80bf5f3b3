import { Effect } from "effect"
import { verdictEvents } from "../heldcall/plan/Verdict.js"
import type { LedgerError } from "../schema/LedgerError.js"
import { Outbox } from "../ledger/Outbox.js"
import { wake, type Wakes } from "../ledger/Wakes.js"
import { watchSession, type PresenceMarks } from "../ledger/PresenceMarks.js"
import type { Adjudication } from "../policy/Adjudicator.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { decideCall } from "../policy/CallDecision.js"
import { effectivePreferences, redactArgs } from "../policy/Preferences.js"
import { summaryOf, templateFor } from "../policy/PresentationTemplate.js"
import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { JsonObject } from "../schema/Json.js"
import { foldUncommitted } from "../heldcall/Reducer.js"
import { registryOf } from "../policy/ActivePolicy.js"
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
 * The `adjudicate` action: the policy's plugins run in this process and the core turns their
 * verdict for the current generation and policy epoch into events (heldcall/plan/Verdict.ts).
 * The driver commits them with the events that precede and follow them up to the next I/O, then
 * runs `committed`.
 */
export const adjudicate = (f: HeldCallFacts, policy: ActivePolicy, now: number) =>
  Effect.gen(function* () {
    const a = yield* decide(f, policy, now)
    const spec = f.spec!
    const preferences = () => effectivePreferences(policy, spec.principal, spec.preferences)
    const { events: verdict, held } = verdictEvents(f, {
      ...a,
      policyEpoch: policy.epoch,
      present: (generation, digest) => presentationOf(f, generation, a, digest, preferences().disclosure ?? "exact", templateFor(policy.profiles, a.executed.tool))
    }, now)
    if (held === undefined) return { events: verdict, committed: null } satisfies Adjudicated as Adjudicated
    const generation = held.generation
    // A standing approval that covers the call is its witness's approval from the hold on.
    const events = [...verdict, ...(yield* standingApprovals(foldUncommitted(f, verdict), registryOf(policy), now))]
    const watch = preferences().cancel_on_disconnect === true
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
