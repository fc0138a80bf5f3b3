import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages } from "@nats-io/jetstream"
import { nanos } from "@nats-io/transport-node"
import type { WitnessClient } from "../client/Client.js"
import type { JsonObject } from "../schema/Json.js"
import { resolveTerm, type EvidenceTerm } from "../schema/EvidenceTerm.js"
import { Streams, Subjects } from "../schema/Subjects.js"

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

/** The durable consumer of a verifier principal on `WK_WITNESS` (its replicas share it). */
export const verifierConsumer = (principal: string): string => `verifier_${principal.replace(/[^A-Za-z0-9_-]/g, "_")}`

/** Backoff before a failed verification is tried again: 1 s doubling, at most 5 min. */
const retryMs = (attempt: number): number => Math.min(300_000, 1_000 * 2 ** Math.max(0, Math.min(20, attempt - 1)))

const within = <A>(ms: number, p: Promise<A>): Promise<A> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())])

/**
 * A verifier route: a witness that checks evidence terms instead of asking a person. For each
 * held call it is told about (a witness request kept in `WK_WITNESS`, read through its own durable
 * consumer from the first request the stream holds, so a call held while the verifier was down or
 * not yet started is verified when it comes; or `verify` directly), it reads the call as a witness, runs the check of every evidence term whose
 * kind it serves (with a timeout, in its own process, never in the kernel's), and attests
 * `evidence` with what it read under its own principal. It never approves: the kernel judges the
 * record against the term and the rule's approvals are still needed. A failed check attests
 * nothing (the term stays unmet; the request is delivered again after a backoff).
 */
export class VerifierRunner {
  private messages: ConsumerMessages | undefined
  private readonly running = new Map<string, Promise<ReadonlyArray<Verified>>>()

  constructor(private readonly opts: VerifierOptions) {}

  /**
   * Consumes witness requests through the verifier's durable consumer (created on the first start
   * with deliver policy "all"), on the client's connection (the `route` NATS role may). A request is
   * acknowledged once every term it could check was attested, or its call is no longer open.
   */
  async start(): Promise<this> {
    const nc = this.opts.client.nc
    const durable = verifierConsumer(this.opts.client.principal)
    const jsm = await jetstreamManager(nc)
    const exists = await jsm.consumers.info(Streams.witness, durable).then(() => true, () => false)
    if (!exists) {
      await jsm.consumers.add(Streams.witness, { durable_name: durable, filter_subject: Subjects.witnessRequests("*"), ack_policy: AckPolicy.Explicit, ack_wait: nanos(Math.max(60_000, 4 * this.opts.timeoutMs)), deliver_policy: DeliverPolicy.All })
    }
    const messages = await (await jetstream(nc).consumers.get(Streams.witness, durable)).consume({ max_messages: 4 })
    this.messages = messages
    const prefix = Subjects.witnessRequests("")
    void (async () => {
      for await (const m of messages) {
        const verified = await this.verify(m.subject.slice(prefix.length)).catch(() => null)
        if (verified === null || verified.some((v) => v.status === "failed")) m.nak(retryMs(m.info.deliveryCount))
        else m.ack()
      }
    })()
    return this
  }

  async stop(): Promise<void> {
    await this.messages?.close().catch(() => undefined)
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
