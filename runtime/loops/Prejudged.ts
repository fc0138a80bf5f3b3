import type { Adjudication } from "../policy/Adjudicator.js"
import type { AdmissionOutcome } from "../policy/Admission.js"

/**
 * Policy work done while the call's previous append was in flight, handed to the action that
 * needs it: the verdict, computed while `call.proposed` is appended, and the admission,
 * computed while `effect.recorded` is. An action uses it only if it was computed for the facts
 * the action sees (same generation and policy epoch; for a verdict, the same call), and decides
 * afresh otherwise, so a hint can save time but never change an outcome.
 */
export interface Prejudged {
  readonly adjudication?: { readonly generation: number; readonly epoch: number; readonly callDigest: string; readonly value: Adjudication }
  readonly admission?: { readonly generation: number; readonly epoch: number; readonly value: AdmissionOutcome }
}

export const noHints: Prejudged = {}
