import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Schema } from "effect"
import { compileGuard } from "../../runtime/audit/internal/compileGuard.js"
import { HeldEvent } from "../../runtime/schema/Events.js"
import { HeldCallFacts } from "../../runtime/schema/Facts.js"

// The replay's compiled event guard must accept exactly what Schema.is(HeldEvent) accepts.
const fixture = JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "witnessed-transfer.events.json"), "utf8")) as Array<Record<string, unknown>>
const wrong: ReadonlyArray<unknown> = [undefined, null, 1.5, -1, "x", true, [], {}, [1], { a: undefined }]

/** Every event with each field removed or replaced, and each nested field of one level replaced. */
const variants = function* (e: Record<string, unknown>): Generator<unknown> {
  yield e
  for (const k of Object.keys(e)) {
    const { [k]: _drop, ...rest } = e
    yield rest
    for (const w of wrong) yield { ...e, [k]: w }
    const v = e[k]
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      for (const kk of Object.keys(v)) for (const w of wrong) yield { ...e, [k]: { ...(v as Record<string, unknown>), [kk]: w } }
    }
  }
}

describe("compileGuard", () => {
  it("agrees with Schema.is on the recorded events and thousands of broken variants", () => {
    const is = Schema.is(HeldEvent)
    const guard = compileGuard(HeldEvent)
    let n = 0
    for (const e of fixture) {
      const { seq: _seq, ...event } = e
      for (const v of variants(event)) {
        n++
        expect([guard(v), v]).toEqual([is(v), v])
      }
    }
    expect(n).toBeGreaterThan(2000)
  })

  it("agrees on facts (records, nullable structs, recursion through JsonValue)", () => {
    const facts = JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "witnessed-transfer.facts.json"), "utf8")) as Record<string, unknown>
    const is = Schema.is(HeldCallFacts)
    const guard = compileGuard(HeldCallFacts)
    for (const v of variants(facts)) expect([guard(v), v]).toEqual([is(v), v])
  })
})
