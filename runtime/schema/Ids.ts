import { Schema } from "effect"

/** The kernel's stable public handle for a held call: `h_` + 32 hex. */
export const HeldId = Schema.String.pipe(Schema.pattern(/^h_[0-9a-f]{32}$/), Schema.brand("HeldId"))
export type HeldId = typeof HeldId.Type

/** Lowercase hex sha256. */
export const Digest = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/), Schema.brand("Digest"))
export type Digest = typeof Digest.Type

/** A principal name such as `agent:alice` or `user:bob`. */
export const Principal = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200), Schema.pattern(/^[A-Za-z0-9_.:@-]+$/))
export type Principal = typeof Principal.Type

/** Agent-chosen identifiers (session, turn, call): printable, bounded, safe in a NATS subject token. */
export const Token = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200), Schema.pattern(/^[A-Za-z0-9_-]+$/))

/**
 * A session id: one token or several joined by dots (`alice.s1`). The results subject is
 * `wk.v1.sessions.<session_id>.results`, so a leading namespace such as `alice` lets nats.conf
 * confine an agent's NATS user to its own sessions (`wk.v1.sessions.alice.>`).
 */
export const SessionId = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(200),
  Schema.pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$/, { message: () => "expected tokens of letters, digits, '_' or '-', joined by '.' (at most 8)" })
)

/** Tool names are NATS subject tokens too (`wk.v1.tools.<tool>.invoke`). */
export const ToolName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100), Schema.pattern(/^[a-z][a-z0-9_]*$/))

/** RFC 3339 UTC timestamp string. */
export const Timestamp = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/, { message: () => "expected an RFC 3339 UTC time such as 2026-01-01T00:00:00Z" })
)
