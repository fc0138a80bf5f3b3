import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { decodeWith } from "../protocol/Decode.js"
import { AttestPayload, CancelPayload, ProposePayload } from "../schema/Requests.js"
import { HeldId } from "../schema/Ids.js"
import { Subjects } from "../schema/Subjects.js"
import type { WitnessRule } from "../schema/WitnessContract.js"
import { badRequest, httpReply } from "./HttpReply.js"
import { heldEventStream } from "./HeldEventStream.js"
import { concerns } from "./InboxFilter.js"
import { KernelLink } from "./KernelLink.js"
import { signedBody } from "./SignedBody.js"
import { staticFile, staticPaths } from "./StaticFiles.js"

/** At most this many open calls are read for one inbox listing. */
const ListLimit = 500

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
    const reply = yield* (yield* KernelLink).request(subject, checked.right.bytes)
    return httpReply(reply)
  }).pipe(Effect.catchTag("GatewayNatsError", unavailable))

const ListQuery = Schema.Struct({
  principal: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  class: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1000)))
})

/** `GET /held?principal=&class=`: open held calls whose rule or veto names the viewer. */
const listHeld = Effect.gen(function* () {
  const req = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(req.url, "http://gateway")
  const q = decodeWith(ListQuery, Object.fromEntries(url.searchParams), "query")
  if (Either.isLeft(q)) return httpReply(q.left)
  const { principal, class: classList } = q.right
  if (principal === undefined && classList === undefined) return badRequest("query: give principal or class (comma-separated classes)", "query.principal")
  const viewer = { ...(principal ? { principal } : {}), classes: (classList ?? "").split(",").map((c) => c.trim()).filter((c) => c !== "") }
  const link = yield* KernelLink
  const ids = (yield* link.openHeldIds).slice(0, ListLimit)
  const views = yield* Effect.forEach(ids, (id) => link.request(Subjects.get, { held_id: id }), { concurrency: 16 })
  const held = views
    .filter((v) => v.status === 200)
    .map((v) => v["held"] as Record<string, unknown> & { principal?: string; lifecycle?: string; active_rule: WitnessRule | null; witness_contract: { veto?: Array<string> } | null; created_at?: string })
    .filter((h) => h.lifecycle === "open" && concerns(viewer, { ...(h.principal ? { principal: h.principal } : {}), rule: h.active_rule, ...(h.witness_contract?.veto ? { veto: h.witness_contract.veto } : {}) }))
    .sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)))
  return httpReply({ status: 200, held })
}).pipe(Effect.catchTag("GatewayNatsError", unavailable))

const getHeld = Effect.gen(function* () {
  const id = yield* heldIdParam
  if (Either.isLeft(id)) return httpReply(id.left)
  return httpReply(yield* (yield* KernelLink).request(Subjects.get, { held_id: id.right }))
}).pipe(Effect.catchTag("GatewayNatsError", unavailable))

const heldEvents = Effect.gen(function* () {
  const id = yield* heldIdParam
  if (Either.isLeft(id)) return httpReply(id.left)
  const known = yield* (yield* KernelLink).request(Subjects.get, { held_id: id.right })
  if (known.status !== 200) return httpReply(known)
  const stream = yield* heldEventStream(id.right)
  return HttpServerResponse.stream(stream, { contentType: "text/event-stream", headers: { "cache-control": "no-store", connection: "keep-alive" } })
}).pipe(Effect.catchTag("GatewayNatsError", unavailable))

/** Every route of the gateway. */
export const gatewayRouter = staticPaths
  .reduce(
    (router, path) => router.pipe(HttpRouter.get(path as HttpRouter.PathInput, Effect.succeed(staticFile(path)))),
    HttpRouter.empty.pipe(
      HttpRouter.post("/tool-calls", forwardSigned(Subjects.propose, ProposePayload, false)),
      HttpRouter.get("/held", listHeld),
      HttpRouter.get("/held/:held_id", getHeld),
      HttpRouter.get("/held/:held_id/events", heldEvents),
      HttpRouter.post("/held/:held_id/attestations", forwardSigned(Subjects.attest, AttestPayload, true)),
      HttpRouter.post("/held/:held_id/cancel", forwardSigned(Subjects.cancel, CancelPayload, true))
    )
  )
  .pipe(
    HttpRouter.get("/", Effect.succeed(HttpServerResponse.redirect("/inbox/")))
  )
