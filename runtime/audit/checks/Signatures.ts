import { envelopeSignatureValid as verifySignature } from "../../schema/EnvelopeSignature.js"
import { passkeyRegistered } from "../../schema/PasskeyAssertion.js"
import { AttestBatchPayload, attestationOfBatch } from "../../schema/BatchAttestation.js"
import { compileGuard } from "../internal/compileGuard.js"
import { callDigest, canonicalize, heldIdOf, jcsDigest } from "../../schema/Canonical.js"
import { policyCall, PolicyApplyTool } from "../../policy/PolicyChange.js"
import type { Envelope } from "../../schema/Envelope.js"
import type { HeldEvent } from "../../schema/Events.js"
import { collector, type HeldCheck } from "./Check.js"
import type { PolicyEpoch } from "../PolicyHistory.js"

const isBatch = compileGuard(AttestBatchPayload)

/** The `op` a signed event's envelope must carry. */
const OpOf: Partial<Record<HeldEvent["type"], string>> = {
  "call.proposed": "propose",
  "attestation.accepted": "attest",
  "attestation.rejected": "attest",
  "call.edited": "edit",
  "call.extended": "extend",
  "standing.applied": "standing.grant",
  "call.cancelled": "cancel",
  "delivery.acknowledged": "ack"
}

const envelopeOf = (e: HeldEvent): Envelope | undefined => ("envelope" in e ? e.envelope : undefined)

/** Where an event and the request it carries disagree (the envelope must sign what the event says). */
const differs = (field: string, mine: unknown, theirs: unknown): string | null => (mine === theirs ? null : `event ${field} ${JSON.stringify(mine)} but the signed payload says ${JSON.stringify(theirs)}`)

const mismatchOf = (heldId: string, e: HeldEvent, p: Envelope["payload"]): string | null => {
  switch (e.type) {
    case "call.extended":
      return differs("witness", e.witness, p["principal"]) ?? differs("class", e.class, p["class"]) ?? differs("held_id", heldId, p["held_id"]) ?? (Date.parse(e.expires_at) === Date.parse(String(p["extend_to"])) ? null : `expires_at ${e.expires_at} is not the signed extend_to ${JSON.stringify(p["extend_to"])}`)
    case "call.edited": {
      if (e.call_digest !== callDigest(e.tool, e.args)) return "call_digest is not sha256(JCS({tool, args})) of the event"
      if (canonicalize(e.args) !== canonicalize(p["args"] ?? null)) return "args are not the signed edit's args"
      if (e.generation !== Number(p["generation"]) + 1) return `generation ${e.generation} does not follow the signed edit's generation ${JSON.stringify(p["generation"])}`
      return differs("witness", e.witness, p["principal"]) ?? differs("class", e.class, p["class"]) ?? differs("from_call_digest", e.from_call_digest, p["call_digest"]) ?? differs("held_id", heldId, p["held_id"])
    }
    case "call.proposed": {
      if (e.tool === PolicyApplyTool && p["op"] === "policy.apply") {
        const call = policyCall(p)
        if (heldIdOf(String(p["principal"]), call.session_id, call.turn_id, call.call_id, e.held_id_salt) !== heldId) return "the signed policy change derives another held id"
        if (canonicalize(e.args["profile"] ?? null) !== canonicalize(p["profile"] ?? null)) return "args.profile is not the signed profile"
        return differs("principal", e.principal, p["principal"])
      }
      if (heldIdOf(String(p["principal"]), String(p["session_id"]), String(p["turn_id"]), String(p["call_id"]), e.held_id_salt) !== heldId) return "the signed proposal derives another held id"
      if (e.call_digest !== callDigest(e.tool, e.args)) return "call_digest is not sha256(JCS({tool, args})) of the event"
      // The digest is the event's own: only the signed payload says what was proposed.
      if (e.tool !== p["tool"]) return `tool ${JSON.stringify(e.tool)} is not the signed proposal's ${JSON.stringify(p["tool"])}`
      if (canonicalize(e.args) !== canonicalize(p["args"] ?? null)) return "args are not the signed proposal's args"
      return differs("principal", e.principal, p["principal"]) ?? differs("session_id", e.session_id, p["session_id"]) ?? differs("turn_id", e.turn_id, p["turn_id"]) ?? differs("call_id", e.call_id, p["call_id"]) ?? differs("continuation_digest", e.continuation_digest, p["continuation_digest"])
    }
    case "attestation.accepted":
    case "attestation.rejected": {
      // A batch attestation signs several calls: the event records the item about this one.
      const signed = p["op"] === "attest_batch" ? (isBatch(p) ? attestationOfBatch(p, heldId) : undefined) : p
      if (signed === undefined) return "the signed batch attestation does not name this call exactly once"
      if (e.attestation_digest !== jcsDigest(signed)) return "attestation_digest is not the digest of the signed attestation"
      return differs("held_id", heldId, signed["held_id"]) ?? differs("witness", e.witness, signed["principal"]) ?? differs("class", e.class, signed["class"])
    }
    case "standing.applied":
      if (e.grant_digest !== jcsDigest(p)) return "grant_digest is not the digest of the signed grant"
      return differs("witness", e.witness, p["principal"]) ?? differs("class", e.class, p["class"]) ?? differs("grant_id", e.grant_id, p["grant_id"]) ?? differs("expires_at", e.expires_at, p["expires_at"])
    case "call.cancelled":
      return differs("held_id", heldId, p["held_id"]) ?? differs("by", e.by, p["principal"])
    case "delivery.acknowledged":
      return differs("held_id", heldId, p["held_id"]) ?? differs("delivery_id", e.delivery_id, p["delivery_id"])
    default:
      return null
  }
}

/**
 * `signatures`: every envelope in the log verifies (ed25519 over JCS of its payload), carries
 * the op of its event, signs what its event records, and its key was registered to its
 * principal in the registry in force at the event's time.
 */
export const signatures: HeldCheck = {
  name: "signatures",
  run: (call, ctx) => {
    const c = collector("signatures", call.heldId)
    for (const { seq, event } of call.steps) {
      const env = envelopeOf(event)
      const op = OpOf[event.type]
      if (op === undefined) continue
      if (env === undefined) {
        // The kernel cancels unsigned only for a proposer's cancel_on_disconnect preference.
        const byKernel = event.type === "call.cancelled" && event.by === "kernel"
        if (event.type !== "call.proposed" && !byKernel) c.fail([seq], `${event.type} carries no envelope`)
        continue
      }
      c.count()
      // A widening policy.apply is recorded as the proposal of the kernel's policy tool.
      const policyChange = event.type === "call.proposed" && event.tool === PolicyApplyTool && env.payload["op"] === "policy.apply"
      const batch = (event.type === "attestation.accepted" || event.type === "attestation.rejected") && env.payload["op"] === "attest_batch"
      if (env.payload["op"] !== op && !policyChange && !batch) c.fail([seq], `${event.type} carries an envelope with op ${JSON.stringify(env.payload["op"])}, expected '${op}'`)
      if (!(ctx.verified?.(seq, env) ?? verifySignature(env))) {
        c.fail([seq], `${event.type}: the signature does not verify over the JCS of the payload`)
        continue
      }
      const mismatch = mismatchOf(call.heldId, event, env.payload)
      if (mismatch !== null) c.fail([seq], `${event.type}: ${mismatch}`)
      const principal = env.payload["principal"]
      if (typeof principal !== "string") {
        c.fail([seq], `${event.type}: payload.principal is missing`)
        continue
      }
      // The registry in force where the request is stored, never at the time it claims.
      const inForce = ctx.policy.registryAt(seq, event.at, ctx.storedAt?.(seq) ?? 0)
      if (inForce.length === 0) {
        c.unsure([seq], `${event.type}: no policy record before seq ${seq}; cannot tell whether the key was registered to ${principal}`)
        continue
      }
      // A passkey's envelope is registered with its credential, origin and rp id (schema/PasskeyAssertion.ts).
      const registered = (p: PolicyEpoch) =>
        env.webauthn === undefined ? (p.policy.principals.get(principal)?.keys.includes(env.key) ?? false) : passkeyRegistered(p.policy.principals.get(principal)?.passkeys, env)
      if (!inForce.some(registered)) {
        const claimed = ctx.policy.around(event.at).filter(registered)
        c.fail([seq], claimed.length > 0
          ? `backdated: ${event.type} claims ${event.at}, when key ${env.key} was registered to ${principal} (epoch ${claimed.map((p) => p.epoch).join(", ")}), but it is stored at seq ${seq}, where epoch ${inForce.map((p) => p.epoch).join(", ")} is in force and does not register it`
          : `${event.type}: key ${env.key} was not registered to ${principal} at seq ${seq} (epochs ${inForce.map((p) => p.epoch).join(", ")})`)
      }
    }
    return c.done()
  }
}
