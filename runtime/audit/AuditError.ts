import { Schema } from "effect"

/** The auditor could not read what it needs (connection, permissions, a missing stream). */
export class AuditError extends Schema.TaggedError<AuditError>()("AuditError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** Wraps a rejected promise as an AuditError naming the operation. */
export const auditError = (operation: string) => (cause: unknown) =>
  new AuditError({ operation, message: `${operation}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
