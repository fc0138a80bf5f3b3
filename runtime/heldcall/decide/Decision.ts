import type { HeldEvent } from "../../schema/Events.js"
import type { Reply } from "../../schema/Reply.js"
import type { WitnessRegistry } from "../Counting.js"

/**
 * What a decision knows besides the facts and the command: the time, and the registry and rules
 * of the policy in force. Nothing else reaches a decider (no clock, no I/O, no keys to verify
 * with): a signed command arrives already authenticated (protocol/Authenticate.ts checks the
 * signature at the edge), and a decider only compares the envelope's key with `keysOf`.
 */
export interface DecideContext extends WitnessRegistry {
  /** Milliseconds since the epoch: every `at` a decision writes, and every expiry it checks. */
  readonly now: number
  readonly isAdmin: (principal: string) => boolean
  /** Who a tool's rule names to read back an unknown outcome (`readback_witnesses`), if anyone. */
  readonly readbackWitnesses: (tool: string) => { readonly classes?: ReadonlyArray<string>; readonly principals?: ReadonlyArray<string> } | undefined
  /** How deep nested held calls may go. */
  readonly maxDependencyDepth: () => number
  /** The longest a held call may stay open. */
  readonly heldTtlMs: number
}

/**
 * The outcome of deciding one command on one held call's facts: the answer, the events to
 * commit (in order, as one append), and whether the call has work after them (`drive`: wake it
 * and drive it; `fresh` when the events were recorded by an earlier request, whose process may
 * have stopped before it drove the call).
 */
export interface Decision {
  readonly reply: Reply
  readonly events: ReadonlyArray<HeldEvent>
  readonly drive?: "cached" | "fresh"
}

/** An answer that writes nothing. */
export const answer = (reply: Reply): Decision => ({ reply, events: [] })

/** Tolerated clock skew for a signed statement's `issued_at` in the future. */
export const SkewMs = 60_000

/** The RFC 3339 time of `ctx.now`: the `at` of every event a decision writes. */
export const atOf = (ctx: { readonly now: number }): string => new Date(ctx.now).toISOString()
