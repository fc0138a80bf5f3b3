import { Clock, Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { HeldCalls } from "../loops/HeldCalls.js"
import { judgeAttestation } from "../heldcall/decide/Attest.js"
import { initialFacts } from "../heldcall/Facts.js"
import { decideContextOf } from "../policy/ActivePolicy.js"
import { AttestBatchPayload, attestationOfBatch } from "../schema/BatchAttestation.js"
import type { AttestPayload } from "../schema/Requests.js"
import { invalidRequest, type Reply } from "./Replies.js"
import { signedRequest } from "./Request.js"

/** One item's answer in a batch reply. */
interface ItemResult {
  readonly held_id: string
  readonly status: number
  readonly disposition?: unknown
  readonly reason?: unknown
}

/**
 * `wk.v1.held.attest_batch`: one signed attestation about several held calls. Each item becomes
 * the attestation a single request would make (`attestationOfBatch`) and is decided on its own
 * call by the same rule (heldcall/decide/Attest.ts), recorded with the batch's envelope so the
 * auditor can check both. `mode: "all"` first judges every item on the calls as they stand and
 * records nothing unless all would be accepted (a call that changes between that check and its
 * own commit is decided again there and may still come back stale: its result says so);
 * `mode: "each"` records each item whatever the others come to.
 */
export const attestBatch = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "attest_batch", AttestBatchPayload)
    const attestations: Array<AttestPayload> = []
    const named = new Set<string>()
    for (const [i, item] of payload.items.entries()) {
      if (named.has(item.held_id)) return invalidRequest(`held call ${item.held_id} is named more than once`, `payload.items.${i}.held_id`)
      named.add(item.held_id)
      attestations.push(attestationOfBatch(payload, item.held_id)!)
    }
    if (payload.mode === "all") {
      const store = yield* HeldCallStore
      const ctx = decideContextOf(policy, yield* Clock.currentTimeMillis)
      const verdicts: Array<ItemResult> = []
      for (const a of attestations) {
        const loaded = yield* store.load(a.held_id)
        const facts = loaded?.facts ?? initialFacts(a.held_id)
        const v = facts.spec === null ? { disposition: "invalid" as const, reason: `no held call ${a.held_id}` } : judgeAttestation(facts, a, envelope, ctx, ctx.now)
        verdicts.push({ held_id: a.held_id, status: v.disposition === "accepted" ? 202 : v.disposition === "stale" ? 409 : 422, disposition: v.disposition, ...("reason" in v ? { reason: v.reason } : {}) })
      }
      if (verdicts.some((v) => v.disposition !== "accepted")) {
        return { status: 409, disposition: "refused", reason: "mode all: not every item would be accepted; nothing was recorded", results: verdicts } satisfies Reply
      }
    }
    const calls = yield* HeldCalls
    const results: Array<ItemResult> = []
    for (const a of attestations) {
      const { reply } = yield* calls.handle(a.held_id, { _tag: "Attest", payload: a, envelope }, { policy })
      results.push({ held_id: a.held_id, status: reply.status, disposition: reply["disposition"], ...(reply["reason"] !== undefined ? { reason: reply["reason"] } : {}) })
    }
    return { status: 200, disposition: "recorded", mode: payload.mode, results } satisfies Reply
  })
