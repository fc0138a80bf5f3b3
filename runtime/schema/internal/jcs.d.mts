/**
 * RFC 8785 (JCS) text of a value: the same output, and the same errors, as the `canonicalize`
 * package, faster on plain JSON data. See jcs.mjs.
 */
export declare const jcs: (value: unknown) => string
