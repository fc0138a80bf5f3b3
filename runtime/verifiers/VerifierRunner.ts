import type { Subscription } from "@nats-io/transport-node"
import type { WitnessClient } from "../client/Client.js"
import type { JsonObject } from "../schema/Json.js"
import { resolveTerm, type EvidenceTerm } from "../schema/EvidenceTerm.js"
import { Subjects } from "../schema/Subjects.js"

/** A verifier of one kind: reads what a term's resolved `params` name, returns what it read. */
export type Check = (params: JsonObject) => Promise<JsonObject>

/** What one term's verification came to. */
export type Verified =
  | { readonly term: string; readonly status: "attested"; readonly disposition: string; readonly read: JsonObject }
  | { readonly term: string; readonly status: "failed"; readonly reason: string }

export interface VerifierOptions {
  /** Signs as the verifier's own principal: it attests like any witness, never for the proposer. */
  readonly client: WitnessClient
  /** The class the verifier attests under (the terms' `by` names it). */
  readonly class: string
  readonly checks: Readonly<Record<string, Check>>
  readonly timeoutMs: number
  readonly onResult?: (heldId: string, v: Verified) => void
}

const within = <A>(ms: number, p: Promise<A>): Promise<A> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())])

/**
 * A verifier route: a witness that checks evidence terms instead of asking a person. For each
 * held call it is told about (a witness request on `wk.v1.witness.requests.<held_id>`, or
 * `verify` directly), it reads the call as a witness, runs the check of every evidence term whose
 * kind it serves (with a timeout, in its own process, never in the kernel's), and attests
 * `evidence` with what it read under its own principal. It never approves: the kernel judges the
 * record against the term and the rule's approvals are still needed. A failed check attests
 * nothing (the term stays unmet; the next request or `verify` tries again).
 */
export class VerifierRunner {
  private sub: Subscription | undefined
  private readonly running = new Map<string, Promise<ReadonlyArray<Verified>>>()

  constructor(private readonly opts: VerifierOptions) {}

  /** Listens for witness requests on the client's connection. */
  start(): this {
    const prefix = Subjects.witnessRequests("")
    this.sub = this.opts.client.nc.subscribe(Subjects.witnessRequests("*"), {
      callback: (_e, m) => void this.verify(m.subject.slice(prefix.length)).catch(() => undefined)
    })
    return this
  }

  stop(): void {
    this.sub?.unsubscribe()
  }

  /** Verifies the evidence terms of one held call it serves; one verification per call at a time. */
  verify(heldId: string): Promise<ReadonlyArray<Verified>> {
    const busy = this.running.get(heldId)
    if (busy !== undefined) return busy
    const work = this.run(heldId).finally(() => this.running.delete(heldId))
    this.running.set(heldId, work)
    return work
  }

  private async run(heldId: string): Promise<ReadonlyArray<Verified>> {
    const { client, checks } = this.opts
    const got = await client.get(heldId)
    const held = got.held
    if (got.status !== 200 || held === undefined || held.contract_digest === null) return []
    const terms = ((held.witness_request?.contract as { evidence?: ReadonlyArray<EvidenceTerm> } | undefined)?.evidence ?? []).filter((t) => checks[t.kind] !== undefined)
    const args = (held["args"] ?? {}) as JsonObject
    const out: Array<Verified> = []
    for (const term of terms) {
      const v = await this.check(heldId, held, term, args)
      out.push(v)
      this.opts.onResult?.(heldId, v)
    }
    return out
  }

  private async check(heldId: string, held: { generation: number; call_digest: string; contract_digest: string | null }, term: EvidenceTerm, args: JsonObject): Promise<Verified> {
    let read: JsonObject
    try {
      read = await within(this.opts.timeoutMs, this.opts.checks[term.kind]!(resolveTerm(term.params ?? {}, args) as JsonObject))
    } catch (e) {
      return { term: term.name, status: "failed", reason: e instanceof Error ? e.message : String(e) }
    }
    const reply = await this.opts.client.attest({
      held_id: heldId,
      class: this.opts.class,
      decision: "evidence",
      generation: held.generation,
      call_digest: held.call_digest,
      contract_digest: held.contract_digest!,
      evidence: { term: term.name, kind: term.kind, read }
    })
    return { term: term.name, status: "attested", disposition: reply.disposition, read }
  }
}
