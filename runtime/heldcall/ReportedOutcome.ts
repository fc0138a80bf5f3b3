import type { HeldCallFacts, Outcome } from "../schema/Facts.js"

/**
 * How an ended call is reported to people and agents: its outcome, except that a call whose
 * effect ran and whose tool reported a failure (`ok: false`) is `tool_failed`, not `completed`.
 * The lifecycle stays `completed` (the effect ran, nothing may run it again); this is only what
 * replies, deliveries and views say happened.
 */
export type ReportedOutcome = Outcome | "tool_failed"

export const reportedOutcome = (f: Pick<HeldCallFacts, "outcome" | "effect">): ReportedOutcome | null =>
  f.outcome === "completed" && f.effect?.ok === false ? "tool_failed" : f.outcome
