import { Effect } from "effect"
import type { Envelope } from "../schema/Envelope.js"
import { verifyPasskeyAssertion } from "../schema/PasskeyAssertion.js"
import { PasskeyCounters } from "../ledger/PasskeyCounters.js"
import { unauthenticated } from "./Replies.js"
import { Rejected } from "./Request.js"

/**
 * The signature counter of an authenticated passkey envelope, taken by the counter store shared by
 * every kernel: refused (401, nothing written) when it does not count above the credential's last
 * one, the mark of a cloned authenticator or of an assertion replayed after a newer one. An
 * ed25519 envelope passes untouched.
 */
export const takePasskeyCounter = (envelope: Envelope) =>
  Effect.gen(function* () {
    if (envelope.webauthn === undefined) return
    const verdict = verifyPasskeyAssertion(envelope)
    if (!verdict.ok) return yield* Effect.fail(new Rejected(unauthenticated(verdict.reason)))
    const { credentialId, counter, assertionDigest } = verdict.assertion
    const taken = yield* (yield* PasskeyCounters).advance(credentialId, counter, assertionDigest)
    if (!taken.ok) return yield* Effect.fail(new Rejected(unauthenticated(`passkey ${credentialId}: signature counter ${counter} does not follow the last one seen, ${taken.last} (a cloned authenticator or a replayed assertion)`)))
  })
