import { eventually } from "../support/Stream.js"

/**
 * What a well-behaved client does under faults: send the same request again until it gets an
 * answer it can act on. `attempt` returns undefined for "not yet" (a 503, a call still
 * running); a thrown error (timeout, no responders, a connection between servers) also retries.
 */
export const retrying = async <T>(what: string, attempt: () => Promise<T | undefined>, deadline: number, pauseMs = 200): Promise<{ value: T; attempts: number }> => {
  let attempts = 0
  const value = await eventually(() => (attempts++, attempt()), Math.max(0, deadline - Date.now()), pauseMs).catch((e: unknown) => {
    throw new Error(`${what}: no answer before the deadline (${attempts} attempts; ${String(e)})`)
  })
  return { value, attempts }
}

/** A seeded PRNG (mulberry32): the same seed gives the same mix of calls and fault times. */
export const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
