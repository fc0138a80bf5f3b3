import { HeldEvent } from "../../schema/Events.js"
import { compileGuard } from "./compileGuard.js"

const isEvent = compileGuard(HeldEvent)
const text = new TextDecoder()

/**
 * Parses and validates one event against the `HeldEvent` schema (a compiled guard). Every
 * event schema is a plain struct without transformations, so a value that passes is already
 * the decoded event: checking instead of rebuilding it keeps the replay's hot path cheap.
 * Throws on an invalid event.
 */
export const parseEvent = (data: Uint8Array): HeldEvent => {
  const value: unknown = JSON.parse(text.decode(data))
  if (!isEvent(value)) throw new Error(`not a held-call event: ${text.decode(data).slice(0, 120)}`)
  return value
}
