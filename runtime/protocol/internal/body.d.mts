/** Deepest JSON nesting accepted; deeper bodies are refused before any recursive decoding. */
export declare const MaxDepth: number
/** Parses a body as JSON, refusing non-UTF-8, too deep or non-JSON bodies with a message. See body.mjs. */
export declare const parseJsonBody: (data: Uint8Array) => { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string }
/** The envelope's outline (`key`, `sig`, `payload.op`, `payload.principal`) of a parsed body. See body.mjs. */
export declare const envelopeHead: (value: unknown) => unknown
/** Whether `sig` is an ed25519 signature over the JCS bytes of `payload` under `key` (both base64). */
export declare const envelopeSignatureValid: (payload: unknown, key: unknown, sig: unknown) => boolean
