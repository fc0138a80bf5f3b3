import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { passkeyVectors, signingVectors } from "./signingVectors.js"

// Writes docs/signing-vectors.json from the kernel's own code (SigningVectors.test.ts keeps it current).
const path = join(import.meta.dirname, "..", "..", "docs", "signing-vectors.json")
writeFileSync(path, `${JSON.stringify({ format: "wk.signing-vectors/1", vectors: signingVectors(), passkey_vectors: passkeyVectors() }, null, 2)}\n`)
console.log(`wrote ${path}`)
