import { continuationOf, type Delivery, type ProposeReply, type WitnessClient } from "../client/Client.js"
import type { JsonObject } from "../schema/Json.js"

/** Which call this is: the kernel's held id is derived from these ids, so proposing them again finds the same call. */
export interface CallIds {
  readonly session_id: string
  readonly turn_id: string
  readonly call_id: string
}

/**
 * Where a governed call stands, as an agent framework sees it: the tool's result, or why there
 * is none. `held` carries what a person needs to find it in the inbox.
 */
export type GovernedOutcome =
  | { readonly status: "completed"; readonly held_id: string; readonly result: unknown }
  | { readonly status: "tool_failed"; readonly held_id: string; readonly error: string }
  | { readonly status: "quarantined"; readonly held_id: string; readonly by: string; readonly reason: string }
  | { readonly status: "denied"; readonly held_id: string; readonly reasons: ReadonlyArray<{ readonly by: string; readonly reason: string }> }
  | { readonly status: "held"; readonly held_id: string; readonly summary: string }
  | { readonly status: "ended"; readonly held_id: string; readonly outcome: "cancelled" | "expired" }
  | { readonly status: "refused"; readonly code: string; readonly message: string }

/** A framework's call id (`call_abc.1`) as a protocol id token (letters, digits, `_`, `-`; at most 64). */
export const idToken = (raw: string): string => raw.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "call"

const executed = (heldId: string, r: { readonly admission: "admitted" | "quarantined" | null; readonly result: unknown; readonly ok?: boolean; readonly error?: string; readonly quarantine?: { readonly by: string; readonly reason: string } }): GovernedOutcome =>
  r.admission === "quarantined"
    ? { status: "quarantined", held_id: heldId, by: r.quarantine?.by ?? "policy", reason: r.quarantine?.reason ?? "quarantined" }
    : r.ok === false
      ? { status: "tool_failed", held_id: heldId, error: r.error ?? "the tool reported a failure" }
      : { status: "completed", held_id: heldId, result: r.result }

const summaryOf = (presentation: JsonObject): string => (typeof presentation["summary"] === "string" ? presentation["summary"] : "a witness must attest")

/** The outcome a propose reply says. */
export const outcomeOfReply = (reply: ProposeReply): GovernedOutcome => {
  if (reply.status === 200) return executed(reply.held_id, reply)
  if (reply.status === 403 && "reasons" in reply) return { status: "denied", held_id: reply.held_id, reasons: reply.reasons }
  if (reply.status === 202 && "outcome" in reply && reply.outcome === "held") return { status: "held", held_id: reply.held_id, summary: summaryOf(reply.witness_request.presentation) }
  const error = "error" in reply ? reply.error : { code: String((reply as { status: number }).status), message: JSON.stringify(reply) }
  // A call that ended without running answers its re-proposal with the end (403 denied, 409 cancelled or expired).
  if ((error.code === "cancelled" || error.code === "expired") && "held_id" in reply && typeof reply.held_id === "string") return { status: "ended", held_id: reply.held_id, outcome: error.code }
  return { status: "refused", code: error.code, message: error.message }
}

/**
 * The outcome a delivered end says, with the continuation the kernel kept for the call (its
 * bytes, checked against the digest the proposal signed) when the call was proposed with one.
 */
export const outcomeOfDelivery = (d: Delivery): GovernedOutcome & { readonly continuation?: Uint8Array } => {
  const outcome = endOf(d)
  const continuation = continuationOf(d)
  return continuation === null ? outcome : { ...outcome, continuation }
}

const endOf = (d: Delivery): GovernedOutcome => {
  switch (d.outcome) {
    case "completed":
    case "tool_failed":
      return executed(d.held_id, { admission: d.admission, result: d.result, ok: d.outcome === "completed" && d.ok !== false, ...(d.outcome === "tool_failed" ? { error: "the tool reported a failure" } : {}) })
    case "denied":
      return { status: "denied", held_id: d.held_id, reasons: d.reasons ?? [] }
    default:
      return { status: "ended", held_id: d.held_id, outcome: d.outcome }
  }
}

/**
 * Proposes the call (again: the same ids and arguments are the same held call, never a second
 * one) and, while it is held, waits up to `waitMs` for its delivered end. Only the kernel decides
 * what runs: nothing a framework passes back on resume can release a held call.
 */
export const governedCall = async (
  client: WitnessClient,
  ids: CallIds,
  tool: string,
  args: JsonObject,
  waitMs = 0,
  /** A checkpoint the kernel keeps with the call and returns with its delivered end (at most 64 KiB). */
  continuation?: Uint8Array
): Promise<GovernedOutcome & { readonly continuation?: Uint8Array }> => {
  const first = outcomeOfReply(await client.propose({ ...ids, tool, args, ...(continuation !== undefined ? { continuation } : {}) }))
  if (first.status !== "held" || waitMs <= 0) return first
  try {
    return outcomeOfDelivery(await client.result(first.held_id, { sessionId: ids.session_id, timeoutMs: waitMs }))
  } catch {
    return first
  }
}

/**
 * Where an earlier held call stands, found by its held id alone: what an app or a model does on
 * a later turn, when the framework's own call id is gone (a real model names each new tool call
 * afresh). It never proposes: the result once the call is released (waiting up to `waitMs` for
 * one in flight), `held` while it is open, its end otherwise; a delivered end carries the
 * continuation the call was proposed with, so the app rebuilds its turn from the kernel's copy. Only this client's principal's own
 * calls can be read (the kernel refuses another's).
 */
export const resumeHeld = async (client: WitnessClient, heldId: string, opts: { readonly sessionId?: string; readonly waitMs?: number } = {}): Promise<GovernedOutcome & { readonly continuation?: Uint8Array }> => {
  const got = await client.get(heldId)
  if (got.status !== 200 || got.held === undefined) return { status: "refused", code: got.error?.code ?? String(got.status), message: got.error?.message ?? `no held call ${heldId}` }
  const held = got.held
  const open = held["lifecycle"] === "open"
  const waitMs = opts.waitMs ?? 0
  const stillHeld: GovernedOutcome = { status: "held", held_id: heldId, summary: summaryOf(held.witness_request?.presentation ?? {}) }
  if (open && waitMs <= 0) return stillHeld
  try {
    // An ended call's delivery is already in the session's stream: read it back.
    return outcomeOfDelivery(await client.result(heldId, { sessionId: opts.sessionId ?? held.session_id, timeoutMs: open ? waitMs : 5_000 }))
  } catch {
    if (open) return stillHeld
    const lifecycle = String(held["lifecycle"])
    if (lifecycle === "cancelled" || lifecycle === "expired") return { status: "ended", held_id: heldId, outcome: lifecycle }
    return { status: "refused", code: "no_delivery", message: `held call ${heldId} ended ${lifecycle}, and its delivery could not be read` }
  }
}
