import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { decodeWith } from "../schema/DecodeWith.js"
import { AttestPayload, CancelPayload, EditPayload, ExtendPayload, ProposePayload } from "../schema/Requests.js"
import { HeldId } from "../schema/Ids.js"
import { AttestBatchPayload } from "../schema/BatchAttestation.js"
import { StandingGrantPayload, StandingRevokePayload } from "../schema/StandingGrant.js"
import { Subjects } from "../schema/Subjects.js"
import type { Role } from "../heldcall/Views.js"
import type { Envelope } from "../schema/Envelope.js"
import { httpReply } from "./HttpReply.js"
import { heldEventStream } from "./HeldEventStream.js"
import { GatewayNatsError, KernelLink } from "./KernelLink.js"
import { signedBody } from "./SignedBody.js"
import { signedRead } from "./SignedRead.js"
import { staticFile, staticPaths } from "./StaticFiles.js"

const heldIdParam = Effect.gen(function* () {
  const { held_id } = yield* HttpRouter.params
  return decodeWith(HeldId, held_id, "held_id")
})

const unavailable = (e: { message: string }) => Effect.succeed(httpReply({ status: 503, error: { code: "unavailable", message: e.message } }))

/** Forwards a signed body to a protocol subject once the edge checks pass. */
const forwardSigned = <A, I>(subject: string, schema: Schema.Schema<A, I>, withHeldId: boolean) =>
  Effect.gen(function* () {
    let heldId: string | undefined
    if (withHeldId) {
      const id = yield* heldIdParam
      if (Either.isLeft(id)) return httpReply(id.left)
      heldId = id.right
    }
    const checked = yield* signedBody(schema, heldId)
    if (Either.isLeft(checked)) return httpReply(checked.left)
    const traceparent = (yield* HttpServerRequest.HttpServerRequest).headers["traceparent"]
    const reply = yield* (yield* KernelLink).request(subject, checked.right.bytes, traceparent)
    return httpReply(reply)
  }).pipe(Effect.catchTag("GatewayNatsError", unavailable))

/** Runs a read once its signed `Authorization` header passed the edge checks (else the 401). */
const withSignedRead = <E, R>(read: (reader: Envelope) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.flatMap(signedRead, Either.match({ onLeft: (reply) => Effect.succeed(httpReply(reply)), onRight: read }))

type HeldReply = { status: number; view?: Role; held?: Record<string, unknown> & { lifecycle?: string; created_at?: string } } & Record<string, unknown>

/** `held.get` for the signed reader: its own view, or 404 when the call is none of its business. */
const readAs = (heldId: string, reader: Envelope) => Effect.flatMap(KernelLink, (link) => link.request(Subjects.get, { held_id: heldId, reader })) as Effect.Effect<HeldReply, GatewayNatsError, KernelLink>

/**
 * `GET /held`: the open held calls the signed reader proposed or may witness, each with its `view`.
 * One request (`wk.v1.held.list`): the kernel proves the reader before it reads any call, so a
 * reader it refuses costs the gateway one signature check and the kernel no read.
 */
const listHeld = withSignedRead((reader) =>
  Effect.gen(function* () {
    const reply = yield* (yield* KernelLink).request(Subjects.heldList, { reader })
    return httpReply(reply.status === 200 ? { status: 200, held: reply["held"] } : reply)
  })
).pipe(Effect.catchTag("GatewayNatsError", unavailable))

/**
 * `GET /kernels`: the health of every kernel that answers (version, uptime, policy epoch, last
 * recovery, controller lag) for a signed reader; the kernels check the reader's key.
 */
const listKernels = withSignedRead((reader) =>
  Effect.gen(function* () {
    const replies = yield* (yield* KernelLink).askKernels({ reader })
    const refused = replies.find((r) => r.status !== 200)
    if (refused !== undefined) return httpReply(refused)
    const kernels = replies.map((r) => r["kernel"]).sort((a, b) => String((a as { owner?: string }).owner).localeCompare(String((b as { owner?: string }).owner)))
    return httpReply({ status: 200, kernels })
  })
).pipe(Effect.catchTag("GatewayNatsError", unavailable))

/** `GET /standing`: the standing approvals the signed reader gave or is covered by (all, for an admin), with their uses. */
const listStanding = withSignedRead((reader) => Effect.map(Effect.flatMap(KernelLink, (link) => link.request(Subjects.standingList, { reader })), httpReply)).pipe(
  Effect.catchTag("GatewayNatsError", unavailable)
)

const getHeld = withSignedRead((reader) =>
  Effect.gen(function* () {
    const id = yield* heldIdParam
    if (Either.isLeft(id)) return httpReply(id.left)
    return httpReply(yield* readAs(id.right, reader))
  })
).pipe(Effect.catchTag("GatewayNatsError", unavailable))

const heldEvents = withSignedRead((reader) =>
  Effect.gen(function* () {
    const id = yield* heldIdParam
    if (Either.isLeft(id)) return httpReply(id.left)
    const known = yield* readAs(id.right, reader)
    if (known.status !== 200 || known.view === undefined) return httpReply(known)
    const stream = yield* heldEventStream(id.right, known.view)
    return HttpServerResponse.stream(stream, { contentType: "text/event-stream", headers: { "cache-control": "no-store", connection: "keep-alive" } })
  })
).pipe(Effect.catchTag("GatewayNatsError", unavailable))

/** `/healthz`: the gateway process answers. */
const healthz = Effect.succeed(HttpServerResponse.unsafeJson({ status: "ok" }))

/** `/readyz`: NATS connected and the events stream readable; 503 naming what is not. */
const readyz = Effect.gen(function* () {
  const checks = yield* (yield* KernelLink).readiness
  const ready = Object.values(checks).every((v) => v === "ok")
  return HttpServerResponse.unsafeJson({ status: ready ? "ready" : "not ready", checks }, { status: ready ? 200 : 503 })
})

/** Every route of the gateway. */
export const gatewayRouter = staticPaths
  .reduce(
    (router, path) => router.pipe(HttpRouter.get(path as HttpRouter.PathInput, Effect.succeed(staticFile(path)))),
    HttpRouter.empty.pipe(
      HttpRouter.get("/healthz", healthz),
      HttpRouter.get("/readyz", readyz),
      HttpRouter.post("/tool-calls", forwardSigned(Subjects.propose, ProposePayload, false)),
      HttpRouter.get("/kernels", listKernels),
      HttpRouter.get("/held", listHeld),
      HttpRouter.get("/held/:held_id", getHeld),
      HttpRouter.get("/held/:held_id/events", heldEvents),
      HttpRouter.post("/held/:held_id/attestations", forwardSigned(Subjects.attest, AttestPayload, true)),
      HttpRouter.post("/held/:held_id/edits", forwardSigned(Subjects.edit, EditPayload, true)),
      HttpRouter.post("/held/:held_id/extensions", forwardSigned(Subjects.extend, ExtendPayload, true)),
      HttpRouter.post("/attestations/batch", forwardSigned(Subjects.attestBatch, AttestBatchPayload, false)),
      HttpRouter.post("/held/:held_id/cancel", forwardSigned(Subjects.cancel, CancelPayload, true)),
      HttpRouter.get("/standing", listStanding),
      HttpRouter.post("/standing", forwardSigned(Subjects.standingGrant, StandingGrantPayload, false)),
      HttpRouter.post("/standing/revocations", forwardSigned(Subjects.standingRevoke, StandingRevokePayload, false))
    )
  )
  .pipe(
    HttpRouter.get("/", Effect.succeed(HttpServerResponse.redirect("/inbox/")))
  )
