/** One benchmark figure next to the floor it is judged against, measured in the same run. */
export interface Row {
  readonly figure: string
  readonly value: number
  readonly floor: number
  readonly ratio: number
  readonly unit: string
  readonly target?: string
  /** "met" / "not met" when the target is a ratio bound (`<= 1.5x`, `>= 0.3x`); "skipped: why" when nothing was measured. */
  readonly verdict?: string
}

export const row = (figure: string, value: number, floor: number, unit: string, target?: string): Row => {
  const ratio = floor === 0 ? 0 : round(value / floor)
  const verdict = target === undefined ? undefined : verdictOf(ratio, target)
  return { figure, value: round(value), floor: round(floor), ratio, unit, ...(target ? { target } : {}), ...(verdict ? { verdict } : {}) }
}

/**
 * `r` judged knowing `reach`: the same ratio for the most any kernel reaches on this box, read off
 * the work floor (the durable floor plus the work no kernel of the profile can skip,
 * bench/internal/callWork.ts): its p50 for a latency, the box's CPU bound on its rate for a rate.
 * A target that bound itself misses is out of reach here, whatever the kernel does. `bound` names
 * the bound in the verdict when it is another one.
 */
export const judgedAgainstReach = (r: Row, reach: number, bound = "work floor"): Row =>
  r.target === undefined || r.verdict !== "not met" || verdictOf(round(reach), r.target) !== "not met" ? r : { ...r, verdict: `not met; out of reach here (${bound} ${round(reach)}x)` }

/** A figure that could not be measured in this run, and why (a package or a server is not there). */
export const skippedRow = (figure: string, unit: string, reason: string, target?: string): Row => ({
  figure, value: 0, floor: 0, ratio: 0, unit, ...(target ? { target } : {}), verdict: `skipped: ${reason}`
})

/** Judges a ratio against a target of the form `<= 1.5x`, `>= 0.3x`, `< 1x` or `> 1x` (the first clause of it). */
export const verdictOf = (ratio: number, target: string): string | undefined => {
  const m = /^\s*(<=|>=|<|>)\s*([0-9.]+)x\b/.exec(target)
  if (m === null) return undefined
  const bound = Number(m[2])
  const met = m[1] === "<=" ? ratio <= bound : m[1] === ">=" ? ratio >= bound : m[1] === "<" ? ratio < bound : ratio > bound
  return met ? "met" : "not met"
}

const round = (x: number) => Math.round(x * 1000) / 1000

/** Prints rows as a fixed-width table. */
export const printTable = (rows: ReadonlyArray<Row>) => {
  const head = ["figure", "value", "floor", "ratio", "unit", "target", "verdict"]
  const cells = rows.map((r) => (r.verdict?.startsWith("skipped") ? [r.figure, "-", "-", "-", r.unit, r.target ?? "", r.verdict] : [r.figure, String(r.value), String(r.floor), String(r.ratio), r.unit, r.target ?? "", r.verdict ?? ""]))
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const line = (c: ReadonlyArray<string>) => c.map((x, i) => x.padEnd(widths[i]!)).join("  ")
  console.log(line(head))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const c of cells) console.log(line(c))
}

export const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)]!
}

/** Per-call latency in µs: for each run, the median of `n` timed calls; the value is the median run. */
export const measureAll = async (runs: number, n: number, figures: ReadonlyArray<() => unknown | Promise<unknown>>): Promise<ReadonlyArray<number>> => {
  const perRun: number[][] = figures.map(() => [])
  const samples = new Float64Array(n)
  // Runs interleave the figures, so a burst of load on the machine hits all of them alike.
  for (let r = 0; r <= runs; r++) {
    for (const [i, once] of figures.entries()) {
      for (let k = 0; k < n; k++) {
        const t0 = performance.now()
        await once()
        samples[k] = (performance.now() - t0) * 1000
      }
      if (r > 0) perRun[i]!.push(median([...samples]))
    }
  }
  return perRun.map(median)
}

export const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.floor(s.length * p))]!
}

/** A progress line on stderr, at most once a second, and the last one (all done) once. */
export const progress = (label: string, write: (line: string) => void = (line) => void process.stderr.write(line)) => {
  let last = 0
  let ended = false
  const t0 = Date.now()
  return (done: number, total: number) => {
    const now = Date.now()
    if (done >= total) {
      if (ended) return
      ended = true
    } else if (now - last < 1000) return
    last = now
    const rate = done / Math.max(0.001, (now - t0) / 1000)
    const eta = rate > 0 ? Math.round((total - done) / rate) : 0
    write(`${label}: ${done}/${total} (${Math.round(rate)}/s, ETA ${eta}s)\n`)
  }
}

/** A measured figure with no floor and no target: what a figure's time is made of (printed after the table). */
export interface Note {
  readonly figure: string
  readonly value: number
  readonly unit: string
}

/** Notes the suites of this run recorded, in order. */
export const notes: Array<Note> = []

export const note = (figure: string, value: number, unit: string): void => void notes.push({ figure, value: round(value), unit })

export const printNotes = (xs: ReadonlyArray<Note>) => {
  if (xs.length === 0) return
  const width = Math.max(...xs.map((n) => n.figure.length))
  console.log("\nwhere the time goes (no target):")
  for (const n of xs) console.log(`  ${n.figure.padEnd(width)}  ${n.value} ${n.unit}`)
}
