import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { HeldCallSpec } from "../../schema/HeldCallSpec.js"
import type { ProposePayload } from "../../schema/Requests.js"
import { conflict, forbidden, notFound, type Reply } from "../../schema/Reply.js"
import { callDigest } from "../../schema/Canonical.js"
import { checkEdge } from "../Dependencies.js"
import { EventIds } from "../EventIds.js"
import { beforeDispatch } from "../Facts.js"
import { admittedWitnesses } from "../Reconciler.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"
import type { Edge } from "./Propose.js"

/**
 * A proposal with `parent_held_id`, decided on the parent: the edge parent -> child is recorded
 * before the child exists, so the parent cannot dispatch without it.
 */
export interface Attach {
  readonly _tag: "Attach"
  readonly childId: string
  readonly payload: ProposePayload
  readonly envelope: Envelope
  /** The child's spec if the child exists already (read before the parent is decided on). */
  readonly child: Pick<HeldCallSpec, "parent_held_id" | "ancestors"> | null
}

/** The reply of an attach that recorded (or found) the edge: the child may now be proposed under it. */
export type Attached = Reply & { readonly status: 200; readonly attached: Edge }

/** The reply of an attach whose edge the kernel refused (a cycle, or too deep): the child is denied, the parent fails closed. */
export type Refused = Reply & { readonly status: 403; readonly outcome: "denied"; readonly refused: string }

export const attachedOf = (r: Reply): Edge | undefined => (r.status === 200 && typeof r["attached"] === "object" ? (r as Attached).attached : undefined)
export const refusedOf = (r: Reply): string | undefined => (r.status === 403 && typeof r["refused"] === "string" ? (r as Refused).refused : undefined)

/** Who may make a held call wait: its own proposer, or a principal its witness contract admits. */
const mayAttach = (parent: HeldCallFacts, principal: string, classes: ReadonlyArray<string>): boolean => {
  if (parent.spec?.principal === principal) return true
  if (parent.witness_contract === null) return false
  const admitted = admittedWitnesses(parent.witness_contract)
  return admitted.principals.includes(principal) || classes.some((c) => admitted.classes.includes(c))
}

/**
 * The same child proposed again finds its edge. Only the parent's proposer or a witness its
 * contract admits may attach, and only before the parent is dispatched. A cycle or a depth over
 * the bound records `dependency.refused` (the parent fails closed: it is driven); an edge to a
 * call that exists under another parent is refused without a write.
 */
export const decideAttach = (parent: HeldCallFacts, c: Attach, ctx: DecideContext): Decision => {
  const p = c.payload
  const parentId = parent.held_id
  if (parent.spec === null) return answer({ ...notFound(parentId), path: "payload.parent_held_id" })
  const attached = (ancestors: Edge["ancestors"]): Attached => ({ status: 200, attached: { parent_held_id: parentId, ancestors, parent_expires_at: parent.spec!.expires_at } })
  const edge = (parent.dependencies ?? []).find((d) => d.held_id === c.childId)
  if (edge !== undefined && edge.status !== "refused" && c.child?.parent_held_id === parentId) return answer(attached(c.child.ancestors ?? []))
  if (!mayAttach(parent, p.principal, ctx.classesOf(p.principal))) {
    return answer(forbidden(`principal '${p.principal}' is neither the proposer nor an admitted witness of held call ${parentId}`))
  }
  if (!beforeDispatch(parent)) {
    const state = parent.lifecycle === "open" ? "dispatched" : parent.lifecycle
    return answer(conflict(`parent_${state}`, `held call ${parentId} is ${state}; it can no longer wait on a nested call`))
  }
  const digest = callDigest(p.tool, p.args)
  const check = checkEdge(parent, { held_id: c.childId, call_digest: digest }, ctx.maxDependencyDepth())
  const base = { held_id: parentId, generation: parent.generation, at: atOf(ctx), child_held_id: c.childId, call_digest: digest, principal: p.principal, envelope: c.envelope }
  if (check._tag === "Refused") {
    const refused: EventOf<"dependency.refused"> = { ...base, type: "dependency.refused", event_id: EventIds.dependencyRefused(parentId, c.childId), reason: check.reason }
    const reply: Refused = { status: 403, outcome: "denied", held_id: c.childId, reasons: [{ by: "kernel", reason: check.reason }], refused: check.reason }
    return { reply, events: [refused], drive: "cached" }
  }
  if (c.child !== null && c.child.parent_held_id !== parentId) {
    return answer(conflict("dependency_mismatch", `held call ${c.childId} already exists ${c.child.parent_held_id === undefined ? "as a root call" : `as a dependency of ${c.child.parent_held_id}`}; a nested call needs a new call_id`))
  }
  const addedId = EventIds.dependencyAdded(parentId, c.childId)
  // The edge is recorded already (the child was not proposed yet): found, not written again.
  if (parent.seen.includes(addedId)) return answer(attached(check.ancestors))
  const added: EventOf<"dependency.added"> = { ...base, type: "dependency.added", event_id: addedId }
  return { reply: attached(check.ancestors), events: [added] }
}

/** A nested call ended: its outcome, decided on its parent. */
export interface Report {
  readonly _tag: "Report"
  readonly child: HeldCallFacts
}

/**
 * Records the child's end on the parent as `dependency.resolved` (one per edge, however often it
 * is reported) and drives the parent (a completed child may release it, any other end fails it
 * closed). A parent that does not exist: 404, nothing to report to.
 */
export const decideReport = (parent: HeldCallFacts, { child }: Report, ctx: DecideContext): Decision => {
  if (parent.spec === null) return answer(notFound(parent.held_id))
  const eventId = EventIds.dependencyResolved(parent.held_id, child.held_id)
  if (parent.seen.includes(eventId)) return { reply: { status: 200 }, events: [], drive: "fresh" }
  const resolved: EventOf<"dependency.resolved"> = {
    type: "dependency.resolved",
    event_id: eventId,
    held_id: parent.held_id,
    generation: parent.generation,
    at: atOf(ctx),
    child_held_id: child.held_id,
    outcome: child.outcome!,
    reasons: child.outcome === "completed" ? [] : child.reasons
  }
  return { reply: { status: 200 }, events: [resolved], drive: "cached" }
}
