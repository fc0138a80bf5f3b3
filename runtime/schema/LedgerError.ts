import { Schema } from "effect"

/** A NATS or JetStream operation failed (network, server, permissions). Retryable. */
export class LedgerError extends Schema.TaggedError<LedgerError>()("LedgerError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** An append's expected last subject sequence did not match: someone else appended first. */
export class AppendConflict extends Schema.TaggedError<AppendConflict>()("AppendConflict", {
  heldId: Schema.String,
  expected: Schema.Number
}) {}

/** True for JetStream's "wrong last sequence" rejection (API error 10071). */
export const isWrongLastSequence = (e: unknown): boolean =>
  e instanceof Error && ((e as { code?: unknown }).code === 10071 || e.message.includes("wrong last sequence"))
