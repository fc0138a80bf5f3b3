import type { HeldCallFacts } from "../schema/Facts.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { reportedOutcome } from "../heldcall/ReportedOutcome.js"
import { toolErrorFor } from "../heldcall/Views.js"
import type { Reply } from "../schema/Reply.js"

export { conflict, forbidden, invalidRequest, notFound, unauthenticated, unavailable, type Reply } from "../schema/Reply.js"

/** The propose reply that the facts of a call imply, or null while the call is still undecided. */
export const proposeReply = (f: HeldCallFacts): Reply | null => {
  const spec = f.spec
  if (spec === null) return null
  const call = canonicalCall(f)!
  switch (f.lifecycle) {
    case "completed": {
      const base = {
        status: 200,
        // `tool_failed` when the tool ran and reported a failure (`ok: false`), else `completed`.
        outcome: reportedOutcome(f),
        held_id: f.held_id,
        call_digest: call.call_digest,
        executed: { tool: call.tool, call_digest: call.call_digest },
        admission: f.result_admission,
        ok: f.effect?.ok ?? false,
        // A quarantined error is quarantined bytes: the proposer sees the tool failed, not why.
        ...toolErrorFor("proposer", f)
      }
      return f.result_admission === "quarantined" ? { ...base, result: null, quarantine: f.quarantine } : { ...base, result: f.result }
    }
    case "denied":
      return { status: 403, outcome: "denied", held_id: f.held_id, reasons: f.reasons }
    case "cancelled":
    case "expired":
      return { status: 409, outcome: f.lifecycle, held_id: f.held_id, error: { code: `call_${f.lifecycle}`, message: `held call ${f.held_id} was ${f.lifecycle}` } }
    case "open":
      if (f.verdict === "REQUIRE_WITNESS" && f.held && f.witness_request !== null && f.execution === "none") {
        return {
          status: 202,
          outcome: "held",
          held_id: f.held_id,
          call_digest: call.call_digest,
          generation: f.generation,
          witness_request: f.witness_request,
          expires_at: spec.expires_at
        }
      }
      return null
  }
}
