// Checks large signed request bodies off the kernel's event loop (EnvelopeChecker.ts): parses one
// body, and answers with its envelope outline and whether its signature verifies, never with the
// body itself. A body that is not JSON is answered with the reason.
import { parentPort } from "node:worker_threads"
import { envelopeHead, envelopeSignatureValid, parseJsonBody } from "./body.mjs"

parentPort.on("message", ({ id, bytes }) => {
  const parsed = parseJsonBody(bytes)
  if (!parsed.ok) return parentPort.postMessage({ id, invalid: parsed.message })
  const v = parsed.value
  const valid = typeof v === "object" && v !== null && !Array.isArray(v) && envelopeSignatureValid(v.payload, v.key, v.sig)
  parentPort.postMessage({ id, head: envelopeHead(v), valid })
})
