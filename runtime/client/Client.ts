import { connect, errors, headers as natsHeaders, nanos, nuid, type NatsConnection } from "@nats-io/transport-node"
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { randomBytes } from "node:crypto"
import { context, type Context as TraceContext } from "@opentelemetry/api"
import { headersOfContext } from "../observability/TraceContext.js"
import { signEnvelope } from "../schema/EnvelopeSignature.js"
import type { Envelope } from "../schema/Envelope.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import type { WitnessRequest } from "../schema/Events.js"
import type { OnBehalfOf } from "../schema/IdentityBinding.js"
import { presentationDigest, sha256Hex } from "../schema/Canonical.js"
import { Subjects, Streams, inboxOptionOf } from "../schema/Subjects.js"
import type { StandingScope, StandingUse } from "../schema/StandingGrant.js"

/** A propose reply, by outcome (protocol.md). */

/** A standing approval as the kernel shows it (protocol: `wk.v1.standing.list`). */
export interface StandingView {
  readonly grant_id: string
  readonly grant_digest: string
  readonly principal: string
  readonly class: string
  readonly scope: StandingScope
  readonly max_uses: number
  readonly uses: ReadonlyArray<StandingUse>
  readonly not_before?: string
  readonly expires_at: string
  readonly reason?: string
  readonly revoked_at?: string
  readonly revoked_by?: string
}

/** The answer to a grant or a revocation: the grant as it stands, or why not. */
export type StandingReply = { readonly status: number; readonly disposition?: string; readonly reason?: string; readonly error?: { readonly code: string; readonly message: string } } & Partial<StandingView>

export type ProposeReply =
  | { status: 200; outcome: "completed" | "tool_failed"; held_id: string; call_digest: string; executed: { tool: string; call_digest: string }; admission: "admitted" | "quarantined"; result: unknown; ok: boolean; error?: string; quarantine?: { by: string; reason: string } }
  | { status: 403; outcome: "denied"; held_id: string; reasons: Array<{ by: string; reason: string }> }
  | { status: 202; outcome: "held"; held_id: string; call_digest: string; generation: number; witness_request: WitnessRequest; expires_at: string }
  | ErrorReply

export interface ErrorReply {
  status: 400 | 401 | 403 | 404 | 409 | 422 | 500 | 503 | 504
  outcome?: string
  held_id?: string
  error: { code: string; message: string; path?: string }
}

export interface AttestReply {
  status: number
  disposition: "accepted" | "duplicate" | "stale" | "invalid"
  reason?: string
}

/** What arrives on `wk.v1.sessions.<session_id>.results`. */
export interface Delivery {
  held_id: string
  session_id: string
  turn_id: string
  call_id: string
  continuation_ref: string | null
  /** The continuation the kernel kept for the call: its sha256 and bytes (base64; null when no longer kept). */
  continuation?: { digest: string; data: string | null }
  /** `tool_failed`: the effect ran and the tool reported a failure (`ok: false`); `completed` otherwise. */
  outcome: "completed" | "tool_failed" | "denied" | "cancelled" | "expired"
  /** For a call whose effect ran: did the tool report success (absent on older kernels). */
  ok?: boolean
  admission: "admitted" | "quarantined" | null
  result: unknown
  /** Why a denied call was denied (each witness's final no, or the policy's reason). */
  reasons?: Array<{ by: string; reason: string }>
  call_digest: string
  delivery_id: string
  /** A witness changed the arguments before approving: who, the arguments that ran, what they replaced. */
  edited?: { by: string; class: string; args: JsonObject; from_call_digest: string; reason?: string }
}

export interface ClientOptions {
  readonly servers: string | Array<string>
  readonly user?: string
  readonly pass?: string
  /** The principal this client speaks for (registered in a profile with its public key). */
  readonly principal: string
  /**
   * The principal's ed25519 secret key: 64 bytes, the 32-byte seed followed by the 32-byte public
   * key (tweetnacl's `secretKey`). From a key file of `wk keygen --out F` or `wk dev-key P --out F`:
   * `Buffer.from(JSON.parse(readFileSync(F, "utf8")).secret_key, "base64")`; in development,
   * `devKeyPair(principal).secretKey` (`witness-kernel/dev-keys`). Every request is signed with it.
   */
  readonly secretKey: Uint8Array
  readonly timeoutMs?: number
}

export interface ProposeInput {
  readonly session_id: string
  readonly turn_id: string
  readonly call_id: string
  readonly tool: string
  readonly args: JsonObject
  readonly continuation_ref?: string
  /**
   * A checkpoint for the turn this call parks (at most 64 KiB): the kernel keeps it by digest and
   * returns it with the delivery (`continuationOf(delivery)`), so the agent need not keep it.
   */
  readonly continuation?: Uint8Array
  readonly preferences?: JsonObject
  /** Proposes the call as a dependency of this open held call (nested hold). */
  readonly parent_held_id?: string
  /**
   * An edit: the generation it replaces. Default: the generation of this client's last held
   * reply for the same call (set it when editing a call this client did not propose).
   */
  readonly supersedes?: number
  /** How long the signed envelope stays valid (default 5 minutes, at most 15). */
  readonly ttlMs?: number
  /** The verified bearer token this proposal is made for (the MCP endpoint's; schema/IdentityBinding.ts). */
  readonly on_behalf_of?: OnBehalfOf
}

export interface AttestInput {
  readonly held_id: string
  readonly class: string
  readonly decision: "approve" | "reject" | "revoke" | "evidence"
  readonly generation: number
  readonly call_digest: string
  readonly contract_digest: string
  readonly evidence_digest?: string
  /** With `decision: "evidence"`: what was read for one of the contract's evidence terms (`{term, kind, read}`). */
  readonly evidence?: { readonly term: string; readonly kind: string; readonly read: JsonObject }
  /** `sha256(JCS(presentation))` of the presentation shown (`presentationDigest`); the kernel refuses it if the call is shown differently now. */
  readonly presentation_digest?: string
  /** Why, in the witness's words (at most 500 characters); the agent gets it with a denial. */
  readonly reason?: string
  readonly ttlMs?: number
  readonly issued_at?: string
  readonly expires_at?: string
  readonly nonce?: string
}

const enc = new TextEncoder()
const dec = new TextDecoder()
/** How many times `result` tries to acknowledge the delivery it read (100, 200 ms apart). */
const AckAttempts = 3

/**
 * A typed client of protocol v1: signs envelopes as one principal, proposes, reads, attests,
 * cancels, acknowledges, and awaits a held call's result from the session stream.
 */
/** A permissions violation, bare or wrapped by a JetStream request. */
const permissionDenied = (e: unknown): boolean => {
  for (let c: unknown = e; c instanceof Error; c = c.cause) if (c instanceof errors.PermissionViolationError) return true
  return false
}

/**
 * An ephemeral pull consumer on a session's results, created without reading the stream's info
 * (confined users may not list its subjects). Two grants exist (nats.conf): the shared `agent`
 * role creates unnamed consumers (the server refuses a durable name there), a confined user
 * creates named ones whose filter is in the subject. A namespaced session (`alice.s1`) tries the
 * named form first, others the unnamed one; a permissions violation tries the other.
 */
const openSessionResults = async (nc: NatsConnection, sessionId: string) => {
  const jsm = await jetstreamManager(nc)
  const config = {
    filter_subject: Subjects.sessionResults(sessionId),
    ack_policy: AckPolicy.None,
    deliver_policy: DeliverPolicy.All,
    inactive_threshold: nanos(60_000),
    mem_storage: true,
    num_replicas: 1
  }
  const named = { ...config, name: `results_${nuid.next()}` }
  const [first, second] = sessionId.includes(".") ? [named, config] : [config, named]
  const info = await jsm.consumers.add(Streams.sessions, first).catch((e: unknown) => {
    if (!permissionDenied(e)) throw e
    return jsm.consumers.add(Streams.sessions, second)
  })
  return jetstream(nc).consumers.get(Streams.sessions, info.name)
}

export class WitnessClient {
  private constructor(
    readonly nc: NatsConnection,
    private readonly opts: ClientOptions,
    private readonly ownsConnection: boolean
  ) {}

  static async connect(opts: ClientOptions): Promise<WitnessClient> {
    const nc = await connect({ servers: opts.servers, user: opts.user, pass: opts.pass, name: `wk-client ${opts.principal}`, ...inboxOptionOf(opts.user) })
    return new WitnessClient(nc, opts, true)
  }

  /** A client over an existing connection (several principals may share one). */
  static over(nc: NatsConnection, opts: Omit<ClientOptions, "servers" | "user" | "pass">): WitnessClient {
    return new WitnessClient(nc, { ...opts, servers: "" }, false)
  }

  get principal(): string {
    return this.opts.principal
  }

  /** Signs a payload as this client's principal. */
  sign(payload: Record<string, unknown>): Envelope {
    return signEnvelope({ ...payload, principal: this.opts.principal }, this.opts.secretKey)
  }

  /**
   * Sends any body to a subject and decodes the JSON reply. The trace context (default: the
   * caller's active OpenTelemetry context) goes along as a `traceparent` header, so the kernel's
   * spans join the caller's trace.
   */
  async request<T>(subject: string, body: unknown, timeoutMs = this.opts.timeoutMs ?? 15_000, trace: TraceContext = context.active()): Promise<T> {
    const data = body instanceof Uint8Array ? body : enc.encode(JSON.stringify(body))
    const headers = headersOfContext(trace, natsHeaders)
    const m = await this.nc.request(subject, data, { timeout: timeoutMs, ...(headers !== undefined ? { headers } : {}) })
    return JSON.parse(dec.decode(m.data)) as T
  }

  /** The tools this principal is granted under the policy in force (`wk.v1.grants.get`, a signed read). */
  grants(): Promise<{ status: number; principal?: string; policy_epoch?: number; tools?: ReadonlyArray<string>; error?: ErrorReply["error"] }> {
    return this.request(Subjects.grants, { reader: this.signedRead(Subjects.grants) })
  }

  /** The generation of the last held reply per call this client proposed: what an edit supersedes. */
  private readonly generations = new Map<string, number>()

  /**
   * Signs and sends a proposal with a fresh nonce and a short expiry, so the envelope cannot be
   * replayed later; a changed call for the same ids is an edit of the generation last seen.
   */
  async propose(input: ProposeInput): Promise<ProposeReply> {
    // With cancel_on_disconnect the kernel probes the session; be present before it can look.
    if (input.preferences?.["cancel_on_disconnect"] === true) this.stayPresent(input.session_id)
    const { ttlMs, supersedes, continuation, ...call } = input
    const key = JSON.stringify([input.session_id, input.turn_id, input.call_id])
    const edits = supersedes ?? this.generations.get(key)
    const envelope = this.sign({
      op: "propose",
      ...call,
      ...(continuation !== undefined ? { continuation_digest: sha256Hex(continuation) } : {}),
      ...(edits !== undefined ? { supersedes: edits } : {}),
      nonce: randomBytes(12).toString("hex"),
      expires_at: new Date(Date.now() + (ttlMs ?? 5 * 60_000)).toISOString()
    })
    // The continuation's bytes travel beside the envelope; the signed payload binds their digest.
    const body = continuation !== undefined ? { ...envelope, continuation: Buffer.from(continuation).toString("base64") } : envelope
    const reply = await this.request<ProposeReply>(Subjects.propose, body)
    if (reply.status === 202 && "generation" in reply) this.generations.set(key, reply.generation)
    else if (reply.status !== 409) this.generations.delete(key)
    return reply
  }

  private readonly present = new Set<string>()

  /**
   * Keeps this connection subscribed to the session's presence subject, so calls proposed with
   * `cancel_on_disconnect` stay alive while it is open. Closing the connection is the disconnect.
   */
  stayPresent(sessionId: string): void {
    if (this.present.has(sessionId)) return
    this.present.add(sessionId)
    this.nc.subscribe(Subjects.presence(sessionId))
  }

  /**
   * A held call as this principal may read it (`wk.v1.held.get` with a signed read of that call):
   * its own view, or from a witness login the witness view that login reads unsigned.
   */
  get(heldId: string): Promise<{ status: number; view?: string; held?: Record<string, unknown> & { session_id: string; generation: number; call_digest: string; contract_digest: string | null; witness_request?: WitnessRequest | null }; error?: ErrorReply["error"] }> {
    return this.request(Subjects.get, { held_id: heldId, reader: this.signedRead(Subjects.get, { held_id: heldId }) })
  }

  /** A signed read of `subject` (and what it names), fresh: the kernel accepts its nonce once. */
  signedRead(subject: string, target: Record<string, unknown> = {}): Envelope {
    return this.sign({ op: "read", principal: this.principal, path: subject, ...target, issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") })
  }

  /** Signs and sends an attestation bound to exactly the given call facts. */
  attest(input: AttestInput): Promise<AttestReply> {
    const now = Date.now()
    const { ttlMs, ...rest } = input
    return this.request(
      Subjects.attest,
      this.sign({
        op: "attest",
        ...rest,
        issued_at: input.issued_at ?? new Date(now).toISOString(),
        expires_at: input.expires_at ?? new Date(now + (ttlMs ?? 10 * 60_000)).toISOString(),
        nonce: input.nonce ?? randomBytes(12).toString("hex")
      })
    )
  }

  /**
   * One signed attestation about several held calls (`wk.v1.held.attest_batch`), each item bound
   * to the call's current generation, digests and presentation as read now. `mode`: `all` (none
   * recorded unless every one would be accepted) or `each`.
   */
  async attestBatch(heldIds: ReadonlyArray<string>, klass: string, decision: "approve" | "reject" = "approve", mode: "all" | "each" = "all", reason?: string): Promise<{ status: number; disposition?: string; reason?: string; results?: Array<{ held_id: string; status: number; disposition?: string; reason?: string }>; error?: ErrorReply["error"] }> {
    const items = []
    for (const heldId of heldIds) {
      const got = await this.get(heldId)
      const h = got.held
      if (got.status !== 200 || h === undefined || h.contract_digest === null) throw new Error(`cannot read held call ${heldId}: ${got.error?.message ?? got.status}`)
      const shown = h.witness_request?.presentation
      items.push({ held_id: heldId, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest, ...(shown !== undefined ? { presentation_digest: presentationDigest(shown) } : {}) })
    }
    const now = Date.now()
    return this.request(
      Subjects.attestBatch,
      this.sign({ op: "attest_batch", principal: this.principal, class: klass, decision, mode, items, ...(reason !== undefined ? { reason } : {}), issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: randomBytes(12).toString("hex") })
    )
  }

  /** Moves a held call's expiry later (`wk.v1.held.extend`), as a witness the contract admits, bound to what it reads now. */
  async extend(heldId: string, klass: string, extendTo: Date, reason?: string): Promise<{ status: number; disposition?: string; reason?: string; expires_at?: string; error?: ErrorReply["error"] }> {
    const got = await this.get(heldId)
    const h = got.held
    if (got.status !== 200 || h === undefined) throw new Error(`cannot read held call ${heldId}: ${got.error?.message ?? got.status}`)
    const now = Date.now()
    return this.request(
      Subjects.extend,
      this.sign({ op: "extend", principal: this.principal, class: klass, held_id: heldId, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest, extend_to: extendTo.toISOString(), ...(reason !== undefined ? { reason } : {}), issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: randomBytes(12).toString("hex") })
    )
  }

  /**
   * Grants a standing approval (`wk.v1.standing.grant`): this witness approves, in advance and
   * under `klass`, every call inside `scope` that is held before `expiresAt`, at most `maxUses`
   * of them. The answer names the grant and its uses so far.
   */
  grantStanding(grant: { readonly grantId: string; readonly class: string; readonly scope: StandingScope; readonly maxUses: number; readonly expiresAt: Date; readonly notBefore?: Date; readonly reason?: string }): Promise<StandingReply> {
    return this.request(
      Subjects.standingGrant,
      this.sign({
        op: "standing.grant",
        principal: this.principal,
        class: grant.class,
        grant_id: grant.grantId,
        scope: grant.scope as unknown as JsonObject,
        max_uses: grant.maxUses,
        ...(grant.notBefore !== undefined ? { not_before: grant.notBefore.toISOString() } : {}),
        issued_at: new Date().toISOString(),
        expires_at: grant.expiresAt.toISOString(),
        ...(grant.reason !== undefined ? { reason: grant.reason } : {}),
        nonce: randomBytes(12).toString("hex")
      })
    )
  }

  /** Ends a standing approval this principal granted (or any, as an admin): `wk.v1.standing.revoke`. */
  revokeStanding(grantId: string, reason?: string): Promise<StandingReply> {
    return this.request(Subjects.standingRevoke, this.sign({ op: "standing.revoke", principal: this.principal, grant_id: grantId, ...(reason !== undefined ? { reason } : {}), issued_at: new Date().toISOString(), nonce: randomBytes(12).toString("hex") }))
  }

  /** The standing approvals this principal gave or is covered by (all of them for an admin): `wk.v1.standing.list`, a signed read. */
  standing(): Promise<{ status: number; principal?: string; grants?: ReadonlyArray<StandingView>; error?: ErrorReply["error"] }> {
    return this.request(Subjects.standingList, { reader: this.signedRead(Subjects.standingList) })
  }

  /**
   * Edit on approve: proposes other arguments for the held call this witness may decide, bound
   * to its current generation and digests. The answer names the new generation and call digest;
   * it still needs an approval of that digest (`decide` reads it afresh).
   */
  async edit(heldId: string, klass: string, args: JsonObject, reason?: string): Promise<{ status: number; disposition?: string; reason?: string; generation?: number; call_digest?: string; error?: ErrorReply["error"] }> {
    const got = await this.get(heldId)
    const h = got.held
    if (got.status !== 200 || h === undefined) throw new Error(`cannot read held call ${heldId}: ${got.error?.message ?? got.status}`)
    const now = Date.now()
    return this.request(
      Subjects.edit,
      this.sign({
        op: "edit",
        principal: this.principal,
        class: klass,
        held_id: heldId,
        generation: h.generation,
        call_digest: h.call_digest,
        contract_digest: h.contract_digest,
        args,
        ...(reason !== undefined ? { reason } : {}),
        issued_at: new Date(now).toISOString(),
        expires_at: new Date(now + 10 * 60_000).toISOString(),
        nonce: randomBytes(12).toString("hex")
      })
    )
  }

  /**
   * Reads a held call and approves (or rejects) exactly its current generation, digests and
   * presentation, optionally saying why.
   */
  async decide(heldId: string, klass: string, decision: AttestInput["decision"] = "approve", reason?: string): Promise<AttestReply> {
    const got = await this.get(heldId)
    if (got.status !== 200 || got.held === undefined) throw new Error(`held.get ${heldId}: ${JSON.stringify(got)}`)
    const h = got.held
    const shown = h.witness_request?.presentation
    return this.attest({
      held_id: heldId,
      class: klass,
      decision,
      generation: h.generation,
      call_digest: h.call_digest,
      contract_digest: h.contract_digest ?? "",
      ...(shown !== undefined ? { presentation_digest: presentationDigest(shown) } : {}),
      ...(reason !== undefined ? { reason } : {})
    })
  }

  /**
   * Settles a call whose outcome is unknown: as a read-back witness (named by the contract or
   * the tool's `readback_witnesses`) or a policy admin, says whether the effect happened.
   */
  async settle(heldId: string, decision: "effect_happened" | "no_effect", opts: { readonly result?: JsonValue; readonly reason?: string } = {}): Promise<{ status: number; disposition?: string; authority?: string; reason?: string; error?: ErrorReply["error"] }> {
    const got = await this.get(heldId)
    if (got.status !== 200 || got.held === undefined) throw new Error(`held.get ${heldId}: ${JSON.stringify(got)}`)
    const now = Date.now()
    return this.request(
      Subjects.settle,
      this.sign({
        op: "settle",
        held_id: heldId,
        generation: got.held.generation,
        call_digest: got.held.call_digest,
        decision,
        ...(opts.result !== undefined ? { result: opts.result } : {}),
        ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
        issued_at: new Date(now).toISOString(),
        expires_at: new Date(now + 10 * 60_000).toISOString(),
        nonce: randomBytes(12).toString("hex")
      })
    )
  }

  cancel(heldId: string, reason = "cancelled by the agent"): Promise<{ status: number; lifecycle?: string; error?: ErrorReply["error"] }> {
    return this.request(Subjects.cancel, this.sign({ op: "cancel", held_id: heldId, reason }))
  }

  ack(heldId: string, deliveryId: string): Promise<{ status: number; continuation_delivery?: string; error?: ErrorReply["error"] }> {
    return this.request(Subjects.ack, this.sign({ op: "ack", held_id: heldId, delivery_id: deliveryId }))
  }

  /**
   * Proposes a policy change as the kernel's `kernel_policy_apply` tool: a narrowing runs at
   * once (200, result `{policy_epoch}`); a widening is held (202) until another admin approves.
   */
  proposePolicy(profile: JsonObject, callId = `policy-${Date.now().toString(36)}`): Promise<ProposeReply> {
    return this.propose({ session_id: "policy", turn_id: "apply", call_id: callId, tool: "kernel_policy_apply", args: { profile } } as ProposeInput)
  }

  /**
   * Signs and sends a `policy.apply` with a fresh nonce and a short expiry, so a captured envelope
   * sent again is a duplicate and, after a few minutes, refused.
   */
  applyPolicy(profile: JsonObject, ttlMs = 5 * 60_000): Promise<{ status: number; policy_epoch?: number; held_id?: string; duplicate?: boolean; error?: ErrorReply["error"] }> {
    return this.request(
      Subjects.policyApply,
      this.sign({ op: "policy.apply", profile, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + ttlMs).toISOString() })
    )
  }

  /**
   * Waits for the final result of a held call. It reads the session's results from the
   * stream (from the start), so it survives this process restarting; it acknowledges the
   * delivery unless told not to. Deliveries repeat until acknowledged: the first one wins.
   * The result is returned once it is read, whether or not the acknowledgment got through
   * (see `acknowledge`).
   */
  async result(heldId: string, opts: { sessionId?: string; timeoutMs?: number; ack?: boolean } = {}): Promise<Delivery> {
    const sessionId = opts.sessionId ?? (await this.get(heldId)).held?.session_id
    if (sessionId === undefined) throw new Error(`unknown held call ${heldId}`)
    const consumer = await openSessionResults(this.nc, sessionId)
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000)
    try {
      while (Date.now() < deadline) {
        const m = await consumer.next({ expires: Math.max(1000, Math.min(5000, deadline - Date.now())) })
        if (m === null) continue
        const d = m.json<Delivery>()
        if (d.held_id !== heldId) continue
        if (opts.ack !== false) await this.acknowledge(heldId, d.delivery_id)
        return d
      }
      throw new Error(`no result for ${heldId} within ${opts.timeoutMs ?? 60_000} ms`)
    } finally {
      await consumer.delete().catch(() => undefined)
    }
  }

  /**
   * Acknowledges a delivery this process now holds, trying again briefly while no kernel answers,
   * one answers 503, or the delivery is not recorded as published yet (409 `not_delivered`: the
   * kernel records a delivery just after publishing it). A failure is not the caller's to
   * handle: the result is in hand, and an unacknowledged delivery is republished until the
   * call's expiry plus its grace period.
   */
  private async acknowledge(heldId: string, deliveryId: string): Promise<void> {
    for (let attempt = 0; attempt < AckAttempts; attempt++) {
      const r = await this.ack(heldId, deliveryId).catch(() => undefined)
      if (r !== undefined && r.status !== 503 && r.error?.code !== "not_delivered") return
      if (attempt + 1 < AckAttempts) await new Promise((done) => setTimeout(done, 100 * 2 ** attempt))
    }
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.nc.drain()
  }
}

/**
 * The continuation a delivery returns, as bytes: null when the call kept none, the kernel no
 * longer holds it, or the bytes do not hash to the digest the proposal signed.
 */
export const continuationOf = (d: Pick<Delivery, "continuation">): Uint8Array | null => {
  if (d.continuation?.data == null) return null
  const bytes = new Uint8Array(Buffer.from(d.continuation.data, "base64"))
  return sha256Hex(bytes) === d.continuation.digest ? bytes : null
}
