import type { HeldCallFacts } from "../../schema/Facts.js"
import { MaxProposeTtlMs } from "../../schema/Requests.js"
import { conflict, invalidRequest, type Reply } from "../Replies.js"

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

/** The generation of the call's last proposal: an edit supersedes it or a re-presentation of it. */
export const proposedGeneration = (f: HeldCallFacts): number => f.proposed_generation ?? f.generation

/**
 * Whether a proposal with a new call digest may become the next generation of an existing,
 * undispatched call. With `supersedes`, only when it names the generation it replaces (the last
 * proposal's or a later re-presentation of it). Without it (v1 clients), unless its digest is
 * one an earlier generation proposed: that is a superseded envelope coming back, refused so it
 * never reverts an edit or voids approvals.
 */
export const supersededProposal = (f: HeldCallFacts, supersedes: number | undefined, digest: string): Reply | undefined => {
  if (supersedes === undefined ? !(f.earlier_digests ?? []).includes(digest) : supersedes >= proposedGeneration(f) && supersedes <= f.generation) return undefined
  const named = supersedes === undefined ? "names no generation it supersedes and proposes an earlier generation's call again" : `supersedes generation ${supersedes}`
  return conflict(
    "superseded",
    `held call ${f.held_id} is at generation ${f.generation} with another call; this proposal ${named}. An edit sets payload.supersedes to the current generation`
  )
}
