import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { DefaultReevaluationPace, emptyLatencyLog, idleBaselineMs, medianOf, observed, paceStep, walkStarted, type LatencyLog } from "../../runtime/policy/ReevaluationPace.js"

// The re-evaluation pace follows the promise it keeps: ALLOW latency during the walk within the
// latency factor (2x) of idle. Pure: time and latencies arrive as data.
fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 1717) })

const pace = DefaultReevaluationPace
const now = 1_000_000
const rate = fc.double({ min: pace.minRatePerSec, max: pace.maxRatePerSec, noNaN: true })
const latency = fc.double({ min: 0.1, max: 10_000, noNaN: true })
const latencies = fc.array(latency, { minLength: pace.minSamples, maxLength: 50 })
/** A log with an idle baseline of `idleMs` (fresh samples) and `recent` replies of the walk. */
const logOf = (idleMs: number, recent: ReadonlyArray<number>): LatencyLog => ({
  idle: Array.from({ length: pace.minSamples }, (_, i) => ({ at: now - i, ms: idleMs })),
  recent,
  floorMs: null
})

describe("the re-evaluation pace", () => {
  it("keeps the rate between the minimum and the maximum, whatever it sees", () => {
    fc.assert(
      fc.property(rate, fc.option(latency, { nil: undefined }), fc.array(latency, { maxLength: 20 }), (r, idle, recent) => {
        const log = idle === undefined ? { ...emptyLatencyLog, recent } : logOf(idle, recent)
        const next = paceStep(pace, r, log, now).rate
        expect(next).toBeGreaterThanOrEqual(pace.minRatePerSec)
        expect(next).toBeLessThanOrEqual(pace.maxRatePerSec)
      })
    )
  })

  it("backs off when the ALLOW p50 is above the factor times the idle p50 (unless already at the minimum)", () => {
    fc.assert(
      fc.property(rate, latency, fc.double({ min: 1.01, max: 100, noNaN: true }), (r, idle, over) => {
        const recent = Array.from({ length: pace.minSamples }, () => idle * pace.latencyFactor * over)
        const next = paceStep(pace, r, logOf(idle, recent), now).rate
        if (r > pace.minRatePerSec) expect(next).toBeLessThan(r)
        else expect(next).toBe(pace.minRatePerSec)
      })
    )
  })

  it("never slows down while the ALLOW p50 is within the headroom of the promise, and grows below the maximum", () => {
    fc.assert(
      fc.property(rate, latency, fc.double({ min: 0, max: 1, noNaN: true }), (r, idle, share) => {
        const recent = Array.from({ length: pace.minSamples }, () => idle * pace.latencyFactor * pace.latencyHeadroom * share)
        const next = paceStep(pace, r, logOf(idle, recent), now).rate
        expect(next).toBeGreaterThanOrEqual(r)
        if (r < pace.maxRatePerSec) expect(next).toBeGreaterThan(r)
      })
    )
  })

  it("a slower ALLOW never gives a faster walk (the rate is antitone in the observed latency)", () => {
    fc.assert(
      fc.property(rate, latency, latencies, fc.double({ min: 1, max: 50, noNaN: true }), (r, idle, recent, slower) => {
        const a = paceStep(pace, r, logOf(idle, recent), now).rate
        const b = paceStep(pace, r, logOf(idle, recent.map((x) => x * slower)), now).rate
        expect(b).toBeLessThanOrEqual(a)
      })
    )
  })

  it("with no ALLOW served since the last step, nobody waits: the rate grows", () => {
    fc.assert(
      fc.property(rate, fc.option(latency, { nil: undefined }), (r, idle) => {
        const next = paceStep(pace, r, idle === undefined ? emptyLatencyLog : logOf(idle, []), now).rate
        expect(next).toBe(Math.min(pace.maxRatePerSec, r * 1.25))
      })
    )
  })

  it("too few replies to judge: the rate holds and they are judged with the next ones", () => {
    fc.assert(
      fc.property(rate, latency, fc.array(latency, { minLength: 1, maxLength: pace.minSamples - 1 }), (r, idle, recent) => {
        const s = paceStep(pace, r, logOf(idle, recent), now)
        expect(s.rate).toBe(r)
        expect(s.log.recent).toEqual(recent)
      })
    )
  })

  it("a judged step forgets what it judged", () => {
    fc.assert(
      fc.property(rate, latency, latencies, (r, idle, recent) => {
        expect(paceStep(pace, r, logOf(idle, recent), now).log.recent).toEqual([])
      })
    )
  })

  it("idle replies make the baseline only inside the horizon; replies during a walk never do", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 2 * pace.idleHorizonMs }), latency), { maxLength: 40 }), latencies, (idle, during) => {
        let log = emptyLatencyLog
        for (const [age, ms] of idle) log = observed(pace, log, { at: now - age, ms }, false)
        const baseline = idleBaselineMs(pace, log, now)
        log = walkStarted(log)
        for (const ms of during) log = observed(pace, log, { at: now, ms }, true)
        expect(idleBaselineMs(pace, log, now)).toBe(baseline)
        const fresh = idle.filter(([age]) => age <= pace.idleHorizonMs).map(([, ms]) => ms)
        expect(baseline).toBe(fresh.length >= pace.minSamples ? medianOf(fresh) : null)
        expect(log.recent).toEqual(during)
      })
    )
  })

  it("without an idle baseline, the walk's lowest judged p50 is the baseline", () => {
    const first = paceStep(pace, 100, { ...emptyLatencyLog, recent: [10, 10, 10] }, now)
    expect(first).toMatchObject({ baselineMs: 10, recentMs: 10, rate: 125 })
    const slower = paceStep(pace, first.rate, { ...first.log, recent: [25, 25, 25] }, now)
    expect(slower).toMatchObject({ baselineMs: 10, recentMs: 25, rate: 62.5 })
  })
})
