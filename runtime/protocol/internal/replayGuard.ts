import { MaxProposeTtlMs } from "../../schema/Requests.js"
import { invalidRequest, type Reply } from "../Replies.js"

/** Tolerated clock skew between a proposer and the kernel. */
const SkewMs = 60_000

/**
 * Whether a propose or policy.apply envelope is still fresh: `expires_at`, when given, in the future and at most
 * `MaxProposeTtlMs` (plus skew) ahead, so a captured envelope stops working soon.
 */
export const staleEnvelope = (expiresAt: string | undefined, now: number): Reply | undefined => {
  if (expiresAt === undefined) return undefined
  const at = Date.parse(expiresAt)
  if (!Number.isFinite(at)) return invalidRequest(`payload.expires_at: '${expiresAt}' is not a time`, "payload.expires_at")
  if (at <= now) return { status: 409, error: { code: "envelope_expired", message: `the envelope expired at ${expiresAt}; sign the proposal again`, path: "payload.expires_at" } }
  if (at > now + MaxProposeTtlMs + SkewMs) {
    return invalidRequest(`payload.expires_at: ${expiresAt} is more than ${MaxProposeTtlMs / 60_000} minutes ahead; an envelope must expire sooner`, "payload.expires_at")
  }
  return undefined
}
