/** A reply body; `status` follows HTTP meanings as protocol.md sets them. */
export type Reply = { readonly status: number } & Record<string, unknown>

export const invalidRequest = (message: string, path: string): Reply => ({ status: 400, error: { code: "invalid_request", message, path } })
export const unauthenticated = (message: string): Reply => ({ status: 401, error: { code: "unauthenticated", message } })
export const forbidden = (message: string): Reply => ({ status: 403, error: { code: "forbidden", message } })
export const notFound = (heldId: string): Reply => ({ status: 404, error: { code: "not_found", message: `no held call ${heldId}` } })
export const conflict = (code: string, message: string): Reply => ({ status: 409, error: { code, message } })
export const unavailable = (message: string): Reply => ({ status: 503, error: { code: "unavailable", message } })
