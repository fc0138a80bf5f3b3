import { describe, expect, it } from "vitest"
import { Effect, Option, Schema } from "effect"
import { preferencesOf } from "../../runtime/cli/ProposeCommand.js"
import { Preferences } from "../../runtime/schema/Preferences.js"

// Every preference the propose payload accepts has a `wk propose` flag, and the flags make a
// payload the protocol's schema accepts.
const none = {
  requireWitness: false,
  alwaysWitness: [] as Array<string>,
  witnessRoute: Option.none<string>(),
  expiresInMs: Option.none<number>(),
  blockMs: Option.none<number>(),
  background: false,
  cancelOnDisconnect: false,
  canonicalize: Option.none<string>(),
  rewrite: Option.none<string>(),
  substitution: Option.none<string>(),
  disclosure: Option.none<string>()
}

describe("wk propose preference flags", () => {
  it("all flags together set every field of the Preferences schema, and decode", () => {
    const p = Effect.runSync(
      preferencesOf({
        ...none,
        requireWitness: true,
        alwaysWitness: ["money_*", "fs_write"],
        witnessRoute: Option.some('{"class":"human"}'),
        expiresInMs: Option.some(60_000),
        blockMs: Option.some(5_000),
        cancelOnDisconnect: true,
        canonicalize: Option.some("preview"),
        rewrite: Option.some("preview"),
        substitution: Option.some("forbid"),
        disclosure: Option.some("redacted")
      })
    )
    expect(Object.keys(p!).sort()).toEqual(Object.keys(Preferences.fields).sort())
    expect(Schema.decodeUnknownSync(Preferences)(p)).toMatchObject({ wait: { mode: "block", max_ms: 5_000 }, transforms: { canonicalize: "preview", rewrite: "preview", substitution: "forbid" } })
    expect(Effect.runSync(preferencesOf({ ...none, background: true }))).toEqual({ wait: { mode: "background" } })
  })

  it("no flag sends no preferences; two wait modes or a route that is not JSON are usage errors", () => {
    expect(Effect.runSync(preferencesOf(none))).toBeUndefined()
    const both = Effect.runSync(Effect.flip(preferencesOf({ ...none, background: true, blockMs: Option.some(10) })))
    expect(both.exit).toBe(2)
    const route = Effect.runSync(Effect.flip(preferencesOf({ ...none, witnessRoute: Option.some("{human") })))
    expect(route.message).toContain("--witness-route is not JSON")
  })
})
