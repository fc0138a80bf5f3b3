import { Effect, Either } from "effect"
import type { LedgerReader } from "../../ledger/LedgerReader.js"
import type { AuditError } from "../AuditError.js"
import type { CheckResult, Violation } from "../AuditReport.js"
import { skipped, tally } from "../Audit.js"
import { rerunPlugins, type CheckContext } from "../checks/index.js"
import type { Traced } from "../HeldHistory.js"
import { makePinnedWasmLoader } from "../PluginObjects.js"
import type { PolicyHistory } from "../PolicyHistory.js"
import { hasPluginDecision } from "./Tally.js"

/**
 * `plugin-pins`: every wasm a trusted epoch pins is in the plugin object store under its digest
 * and hashes to it (a swapped plugin is caught without re-running anything); one read per pin.
 */
export const pinCheck = (policy: PolicyHistory, bucket: string): Effect.Effect<CheckResult, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const pins = new Map<string, string>()
    for (const e of policy.epochs) for (const p of e.policy.profiles) for (const pin of p.plugins ?? []) if (!pins.has(pin.sha256)) pins.set(pin.sha256, `${pin.name} (epoch ${e.epoch})`)
    if (pins.size === 0) return { name: "plugin-pins", status: "passed", checked: 0, violations: [], unverified: [], note: "no plugin pinned" }
    const loader = yield* Effect.either(makePinnedWasmLoader(bucket))
    if (Either.isLeft(loader)) return skipped("plugin-pins", `cannot read the plugin object store: ${loader.left.message}`)
    const violations: Array<Violation> = []
    const unverified: Array<{ held_id: string; seqs: Array<number>; message: string }> = []
    for (const [sha256, what] of pins) {
      const w = yield* loader.right(sha256)
      if (w.kind === "swapped") violations.push({ check: "plugin-pins", held_id: "", seqs: [], message: `${what}: the object store's wasm/${sha256} holds other bytes (sha256 ${w.actual})` })
      else if (w.kind === "absent") unverified.push({ held_id: "", seqs: [], message: `${what}: no wasm/${sha256} in the plugin object store` })
    }
    return { name: "plugin-pins", status: violations.length > 0 ? "failed" : unverified.length > 0 ? "pending" : "passed", checked: pins.size, violations, unverified, note: "stored wasm hashed against the pins; decisions are re-run with --rerun-plugins" }
  })

/** `plugin-rerun`: every recorded plugin decision re-run from its pinned wasm (see checks/PluginRerun.ts); skipped when not asked. */
export const pluginRerunCheck = (rerun: boolean, bucket: string, traced: ReadonlyArray<Traced>, ctx: CheckContext): Effect.Effect<CheckResult, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    if (!rerun) return skipped("plugin-rerun", "not re-run (--no-rerun): recorded plugin decisions are unverified")
    if (!traced.some(hasPluginDecision)) return { ...skipped("plugin-rerun", "no recorded plugin decision in the selection"), status: "passed" }
    const loader = yield* Effect.either(makePinnedWasmLoader(bucket))
    if (Either.isLeft(loader)) return skipped("plugin-rerun", `cannot read the plugin object store: ${loader.left.message}`)
    const t = tally()
    const found = yield* rerunPlugins(traced, ctx, loader.right)
    t.add("plugin-rerun", found)
    return t.result("plugin-rerun", `${found.checked - found.reused} re-run(s); ${found.reused} decision(s) identical to one re-run already`)
  })
