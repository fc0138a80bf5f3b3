import { HttpServerResponse } from "@effect/platform"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot } from "../cli/Paths.js"

const types: Record<string, string> = { html: "text/html; charset=utf-8", js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8", json: "application/json" }

/** The inbox's files, and the vendored browser builds it loads (tweetnacl), read once at start. */
const files: Record<string, string> = {
  "/inbox/": join(repoRoot, "runtime/gateway/inbox/index.html"),
  "/inbox/inbox.js": join(repoRoot, "runtime/gateway/inbox/inbox.js"),
  "/inbox/timeline.js": join(repoRoot, "runtime/gateway/inbox/timeline.js"),
  "/inbox/jcs.js": join(repoRoot, "runtime/gateway/inbox/jcs.js"),
  "/inbox/inbox.css": join(repoRoot, "runtime/gateway/inbox/inbox.css"),
  "/inbox/vendor/nacl-fast.min.js": join(repoRoot, "node_modules/tweetnacl/nacl-fast.min.js"),
  "/openapi.json": join(repoRoot, "docs/openapi.json")
}

export const staticPaths = Object.keys(files)

/** The response for a static path (read per request in dev is cheap and keeps edits live). */
export const staticFile = (path: string) => {
  const file = files[path]!
  const ext = file.slice(file.lastIndexOf(".") + 1)
  return HttpServerResponse.text(readFileSync(file, "utf8"), { contentType: types[ext] ?? "application/octet-stream", headers: { "cache-control": "no-store" } })
}
