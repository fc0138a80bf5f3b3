import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { beforeDispatch, initialFacts } from "../heldcall/Facts.js"
import { checkEdge, maxDependencyDepth } from "../heldcall/Dependencies.js"
import { admittedWitnesses } from "../heldcall/Reconciler.js"
import { classesOf } from "../policy/ActivePolicy.js"
import { eventOf } from "../loops/Actions.js"
import type { Ancestor } from "../schema/HeldCallSpec.js"
import type { CallDenied, DependencyAdded, DependencyRefused, HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { ProposePayload } from "../schema/Requests.js"
import { conflict, forbidden, notFound, unavailable, type Reply } from "./Replies.js"
import type { Signed } from "./Request.js"
import { proposedEvent } from "./internal/proposedEvent.js"
import { HeldIds } from "./HeldIds.js"

/** How a proposal with `parent_held_id` attaches to its parent. */
export type Attached =
  | { readonly _tag: "Attached"; readonly parent_held_id: string; readonly ancestors: ReadonlyArray<Ancestor>; readonly parent_expires_at: string }
  /** Answer now; `refusedParent` names a parent that was failed closed (drive it). */
  | { readonly _tag: "Answer"; readonly reply: Reply; readonly refusedParent?: string }

/** Who may make a held call wait: its own proposer, or a principal its witness contract admits. */
const mayAttach = (parent: HeldCallFacts, principal: string, classes: ReadonlyArray<string>): boolean => {
  if (parent.spec?.principal === principal) return true
  if (parent.witness_contract === null) return false
  const admitted = admittedWitnesses(parent.witness_contract)
  return admitted.principals.includes(principal) || classes.some((c) => admitted.classes.includes(c))
}

/**
 * Adds the edge parent -> child before the child exists, so the parent cannot dispatch without
 * it: `dependency.added` on the parent, under its lock and with expected sequence. A cycle or a
 * depth over the bound appends `dependency.refused` instead (the parent fails closed) and
 * records a new child as denied with the same reason.
 */
export const attach = (childId: string, digest: string, req: Signed<ProposePayload>) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const p = req.payload
    const parentId = p.parent_held_id!
    const bound = maxDependencyDepth(req.policy.profiles)
    const child = yield* store.load(childId)
    const decided: Attached | { readonly _tag: "Refused"; readonly reason: string } = yield* store.serialized(
      parentId,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          const loaded = yield* store.load(parentId, attempt === 0 ? "cached" : "fresh")
          if (loaded === null || loaded.facts.spec === null) return { _tag: "Answer", reply: { ...notFound(parentId), path: "payload.parent_held_id" } } as const
          const parent = loaded.facts
          const edge = (parent.dependencies ?? []).find((d) => d.held_id === childId)
          // The same child proposed again: the edge is already recorded.
          if (edge !== undefined && edge.status !== "refused" && child?.facts.spec?.parent_held_id === parentId) {
            return { _tag: "Attached", parent_held_id: parentId, ancestors: child.facts.spec.ancestors ?? [], parent_expires_at: parent.spec!.expires_at } as const
          }
          if (!mayAttach(parent, p.principal, classesOf(req.policy, p.principal))) {
            return { _tag: "Answer", reply: forbidden(`principal '${p.principal}' is neither the proposer nor an admitted witness of held call ${parentId}`) } as const
          }
          if (!beforeDispatch(parent)) {
            const state = parent.lifecycle === "open" ? "dispatched" : parent.lifecycle
            return { _tag: "Answer", reply: conflict(`parent_${state}`, `held call ${parentId} is ${state}; it can no longer wait on a nested call`) } as const
          }
          const check = checkEdge(parent, { held_id: childId, call_digest: digest }, bound)
          let event: HeldEvent
          if (check._tag === "Refused") {
            event = eventOf<typeof DependencyRefused.Type>({
              type: "dependency.refused",
              event_id: `dependency.refused:${parentId}:${childId}`,
              held_id: parentId,
              generation: parent.generation,
              child_held_id: childId,
              call_digest: digest,
              reason: check.reason,
              principal: p.principal,
              envelope: req.envelope
            })
          } else {
            if (child !== null && child.facts.spec !== null && child.facts.spec.parent_held_id !== parentId) {
              return { _tag: "Answer", reply: conflict("dependency_mismatch", `held call ${childId} already exists ${child.facts.spec.parent_held_id === undefined ? "as a root call" : `as a dependency of ${child.facts.spec.parent_held_id}`}; a nested call needs a new call_id`) } as const
            }
            event = eventOf<typeof DependencyAdded.Type>({
              type: "dependency.added",
              event_id: `dependency.added:${parentId}:${childId}`,
              held_id: parentId,
              generation: parent.generation,
              child_held_id: childId,
              call_digest: digest,
              principal: p.principal,
              envelope: req.envelope
            })
          }
          const r = yield* store.append(loaded, [event]).pipe(Effect.either)
          if (r._tag === "Left") {
            if (r.left._tag !== "AppendConflict") return yield* r.left
            continue
          }
          return check._tag === "Refused" ? ({ _tag: "Refused", reason: check.reason } as const) : ({ _tag: "Attached", parent_held_id: parentId, ancestors: check.ancestors, parent_expires_at: parent.spec!.expires_at } as const)
        }
        return { _tag: "Answer", reply: unavailable(`held call ${parentId} is changing too fast; retry`) } as const
      })
    )
    if (decided._tag !== "Refused") return decided
    const reasons = [{ by: "kernel", reason: decided.reason }]
    if (child === null) yield* recordRefusedChild(childId, digest, req, decided.reason)
    return { _tag: "Answer", reply: { status: 403, outcome: "denied", held_id: childId, reasons }, refusedParent: parentId } as const
  })

/** A refused nested call is still recorded (proposed, then denied) so it can be read and audited. */
const recordRefusedChild = (childId: string, digest: string, req: Signed<ProposePayload>, reason: string) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const now = Date.now()
    // Recorded already ended: it expires as it is proposed.
    const { salt } = (yield* HeldIds).of(req.payload)
    const proposed = proposedEvent({ heldId: childId, salt, generation: 1, req, digest, now, expiresAt: now, parent: { parent_held_id: req.payload.parent_held_id! } })
    const base = { held_id: childId, generation: 1, at: proposed.at }
    const denied = eventOf<typeof CallDenied.Type>({ ...base, type: "call.denied", event_id: `call.denied:${childId}:g1`, reasons: [{ by: "kernel", reason }] })
    yield* store.serialized(
      childId,
      store.append({ facts: initialFacts(childId), revision: 0 }, [proposed, denied]).pipe(Effect.catchTag("AppendConflict", () => Effect.void), Effect.asVoid)
    )
  })
