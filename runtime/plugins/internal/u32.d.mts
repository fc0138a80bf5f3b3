/** Writes `n` as a little-endian u32 at `at`. See u32.mjs. */
export declare const putU32: (bytes: Uint8Array, at: number, n: number) => void
/** Reads the little-endian u32 at `at`. See u32.mjs. */
export declare const getU32: (bytes: Uint8Array, at: number) => number
