// Little-endian u32 fields of the runner <-> worker shared buffers, read and written by both
// sides (the runner in TypeScript, the worker in plain JavaScript), so both import this one file.

/** Writes `n` as a little-endian u32 at `at`. */
export const putU32 = (bytes, at, n) => {
  bytes[at] = n & 255
  bytes[at + 1] = (n >>> 8) & 255
  bytes[at + 2] = (n >>> 16) & 255
  bytes[at + 3] = (n >>> 24) & 255
}

/** Reads the little-endian u32 at `at`. */
export const getU32 = (bytes, at) => (bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)) >>> 0
