import { HttpServerResponse } from "@effect/platform"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { packageRoot } from "../observability/PackageRoot.js"

const types: Record<string, string> = { html: "text/html; charset=utf-8", js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8", json: "application/json" }

/** The inbox's files and the OpenAPI document. */
const files: Record<string, string> = {
  "/inbox/": join(packageRoot, "runtime/gateway/inbox/index.html"),
  "/inbox/inbox.js": join(packageRoot, "runtime/gateway/inbox/inbox.js"),
  "/inbox/keys.js": join(packageRoot, "runtime/gateway/inbox/keys.js"),
  "/inbox/timeline.js": join(packageRoot, "runtime/gateway/inbox/timeline.js"),
  "/inbox/jcs.js": join(packageRoot, "runtime/gateway/inbox/jcs.js"),
  "/inbox/words.js": join(packageRoot, "runtime/gateway/inbox/words.js"),
  "/inbox/batch.js": join(packageRoot, "runtime/gateway/inbox/batch.js"),
  "/inbox/standing.js": join(packageRoot, "runtime/gateway/inbox/standing.js"),
  "/inbox/state.js": join(packageRoot, "runtime/gateway/inbox/state.js"),
  "/inbox/render.js": join(packageRoot, "runtime/gateway/inbox/render.js"),
  "/inbox/actions.js": join(packageRoot, "runtime/gateway/inbox/actions.js"),
  "/inbox/inbox.css": join(packageRoot, "runtime/gateway/inbox/inbox.css"),
  "/openapi.json": join(packageRoot, "docs/openapi.json")
}

export const staticPaths = Object.keys(files)

/**
 * Headers of every static response. The inbox signs with the witness's key, so no other origin
 * may frame it (clickjacking a one-click approval) and it runs only its own scripts and styles,
 * talking only to this gateway.
 */
export const staticHeaders = {
  "cache-control": "no-store",
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer"
} as const

/** The response for a static path (read per request in dev is cheap and keeps edits live). */
export const staticFile = (path: string) => {
  const file = files[path]!
  const ext = file.slice(file.lastIndexOf(".") + 1)
  return HttpServerResponse.text(readFileSync(file, "utf8"), { contentType: types[ext] ?? "application/octet-stream", headers: staticHeaders })
}
