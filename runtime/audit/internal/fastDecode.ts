import type { Commit } from "../../schema/Commit.js"
import { HeldEvent } from "../../schema/Events.js"
import { compileGuard } from "./compileGuard.js"

const isEvent = compileGuard(HeldEvent)
const text = new TextDecoder()

/**
 * Parses and validates one stored message as a commit (schema/Commit.ts), each event against
 * the `HeldEvent` schema (a compiled guard). Every event schema is a plain struct without
 * transformations, so a value that passes is already the decoded commit: checking instead of
 * rebuilding it keeps the replay's hot path cheap. Throws on an invalid commit, naming the first
 * index that is not an event.
 */
export const parseCommit = (data: Uint8Array): Commit => {
  const value: unknown = JSON.parse(text.decode(data))
  const shown = () => text.decode(data).slice(0, 120)
  if (typeof value !== "object" || value === null) throw new Error(`not a commit: ${shown()}`)
  const c = value as Record<string, unknown>
  if (typeof c["commit_id"] !== "string" || typeof c["held_id"] !== "string" || !Array.isArray(c["events"])) throw new Error(`not a commit (commit_id, held_id, events): ${shown()}`)
  const events = c["events"] as ReadonlyArray<unknown>
  if (events.length === 0) throw new Error(`a commit without events: ${shown()}`)
  for (let i = 0; i < events.length; i++) if (!isEvent(events[i])) throw new Error(`index ${i} is not a held-call event: ${JSON.stringify(events[i]).slice(0, 120)}`)
  return value as Commit
}
