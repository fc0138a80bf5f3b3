import { HttpServerResponse } from "@effect/platform"

/** A protocol reply as an HTTP response: the reply's `status` is the HTTP status, the body is the reply. */
export const httpReply = (reply: { readonly status: number } & Record<string, unknown>) =>
  HttpServerResponse.unsafeJson(reply, { status: reply.status })

/** The protocol's 400, naming the offending field. */
export const badRequest = (message: string, path: string) => httpReply({ status: 400, error: { code: "invalid_request", message, path } })
