import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { retryBackoffMs } from "../../runtime/loops/Controller.js"

describe("the controller's retry backoff", () => {
  it("starts at a second, doubles per delivery and stops at a minute", () => {
    expect([1, 2, 3, 4, 7, 8, 100].map(retryBackoffMs)).toEqual([1000, 2000, 4000, 8000, 60_000, 60_000, 60_000])
  })
  it("never shrinks as deliveries grow, and stays within [1 s, 60 s]", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 10_000 }), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a]
        expect(retryBackoffMs(lo)).toBeLessThanOrEqual(retryBackoffMs(hi))
        expect(retryBackoffMs(hi)).toBeGreaterThanOrEqual(1000)
        expect(retryBackoffMs(hi)).toBeLessThanOrEqual(60_000)
      })
    )
  })
})
