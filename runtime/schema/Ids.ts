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

const Rfc3339Utc = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?Z$/

/**
 * Whether a string is a real RFC 3339 UTC time: the right shape, and a date and time that exist
 * (month 01-12, a day the month has, hour 00-23, minute and second 00-59). `Date.parse` alone
 * is no check: it gives NaN, or rolls over, for times that do not exist.
 */
export const isRfc3339Utc = (s: string): boolean => {
  const m = Rfc3339Utc.exec(s)
  if (m === null) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const t = new Date(Date.UTC(year, month - 1, day, hour, minute, second))
  return (
    t.getUTCFullYear() === year &&
    t.getUTCMonth() === month - 1 &&
    t.getUTCDate() === day &&
    t.getUTCHours() === hour &&
    t.getUTCMinutes() === minute &&
    t.getUTCSeconds() === second
  )
}

/** RFC 3339 UTC timestamp string naming a time that exists. */
export const Timestamp = Schema.String.pipe(
  Schema.filter((s) => isRfc3339Utc(s), {
    message: (issue) => `expected an RFC 3339 UTC time that exists, such as 2026-01-01T00:00:00Z (got ${JSON.stringify(issue.actual)})`
  })
)
