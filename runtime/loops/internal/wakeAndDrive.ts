import { Effect } from "effect"
import type { Freshness } from "../../ledger/HeldCallStore.js"
import type { LedgerError } from "../../schema/LedgerError.js"
import type { Driving, Wakes } from "../../ledger/Wakes.js"

import type { Follow } from "../../heldcall/ReplyPath.js"

/** The wake written before a drive: one that says who drives (`driving`), a plain one, or none (the drive's own claim writes one). */
export type Announce = { readonly driving?: Driving } | "none"

/**
 * The wake, then the drive: the wake lets another process finish the call if this one stops.
 * It is started first and awaited once the drive is forked, so both go out at once; nothing
 * irreversible happens before the execution claim, which writes its own wake first.
 */
export const wakeAndDrive = <Driven>(
  wakes: Wakes["Type"],
  drive: (heldId: string, freshness: Freshness) => Effect.Effect<Driven, LedgerError>,
  heldId: string,
  freshness: Freshness,
  follow: Exclude<Follow, "none">,
  announce: Announce = {}
): Effect.Effect<Driven | null, LedgerError> =>
  Effect.gen(function* () {
    const woken = announce === "none" ? Effect.void : wakes.begin(heldId, announce.driving)
    if (follow === "fork") {
      yield* Effect.forkDaemon(drive(heldId, freshness).pipe(Effect.ignore))
      yield* woken
      return null
    }
    yield* woken
    return yield* drive(heldId, freshness)
  })
