import { activePolicy, type ActivePolicy } from "../../policy/ActivePolicy.js"
import { judgeAttestation } from "../../protocol/Attest.js"
import { AttestPayload } from "../../schema/Requests.js"
import { compileGuard } from "../internal/compileGuard.js"
import { collector, type HeldCheck } from "./Check.js"

const isAttest = compileGuard(AttestPayload)

/** Fields an accepted attestation event copies from the signed request. */
const Copied = ["generation", "call_digest", "contract_digest", "decision", "issued_at", "expires_at", "nonce", "evidence_digest"] as const

/**
 * `attestation-binding`: every `attestation.accepted` records what was signed, and the kernel's
 * own acceptance rule (`judgeAttestation`, invariants 3 and 4) accepts it against the facts just
 * before it, at its time, under the registry then in force: bound to this held call, its
 * generation, call digest and contract digest, unexpired, unreplayed, from a registered
 * witness of an admitted class, independent of the proposer.
 */
export const attestationBinding: HeldCheck = {
  name: "attestation-binding",
  run: (call, ctx) => {
    const c = collector("attestation-binding", call.heldId)
    for (const { seq, event, before, fresh } of call.steps) {
      if (event.type !== "attestation.accepted" || !fresh) continue
      c.count()
      const p: unknown = event.envelope.payload
      if (!isAttest(p)) {
        c.fail([seq], "the signed attestation is not an attest payload (protocol: Attest)")
        continue
      }
      const differs: Array<string> = Copied.filter((k) => (event as Record<string, unknown>)[k] !== (p as Record<string, unknown>)[k])
      if (event.witness !== p.principal) differs.push("principal")
      if (event.class !== p.class) differs.push("class")
      if (differs.length > 0) c.fail([seq], `the event's ${differs.join(", ")} differ from the signed attestation`)
      if (p.held_id !== call.heldId) c.fail([seq], `the signed attestation is bound to ${p.held_id}, not this call`)
      if (before.spec === null) {
        c.fail([seq], "accepted before any proposal of this call")
        continue
      }
      const inForce = ctx.policy.around(event.at)
      const policies: ReadonlyArray<ActivePolicy> =
        inForce.length > 0 ? inForce.map((e) => e.policy) : [activePolicy(0, [{ name: "unrecorded", principals: { [p.principal]: { keys: [], classes: [p.class] } } }])]
      if (inForce.length === 0) c.unsure([seq], `no policy record in force at ${event.at}: witness registration and class not verified`)
      const now = Date.parse(event.at)
      const verdicts = policies.map((policy) => judgeAttestation(before, p, event.envelope, policy, now))
      const accepted = verdicts.some((v) => v.disposition === "accepted")
      if (!accepted) {
        const v = verdicts[0]!
        c.fail([seq], `accepted, but the acceptance rule says ${v.disposition}: ${"reason" in v ? v.reason : ""}`)
      }
    }
    return c.done()
  }
}
