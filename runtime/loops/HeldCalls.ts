import { Context, Deferred, Effect, Layer } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../schema/LedgerError.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { Wakes } from "../ledger/Wakes.js"
import { beforeDispatch, quiescent } from "../heldcall/Facts.js"
import type { Command, DecideContext } from "../heldcall/Decide.js"
import { decideContextOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { Reply } from "../schema/Reply.js"
import { KernelConfig } from "../KernelConfig.js"
import { Driver, type Driven } from "./Driver.js"
import { decideAndCommit, decideUntilCommitted } from "./internal/decideAndCommit.js"
import { wakeAndDrive, type Follow } from "./internal/wakeAndDrive.js"

export type { Follow } from "./internal/wakeAndDrive.js"

export interface HandleOptions {
  /** The policy the command was authenticated under (default: the policy this process holds now). */
  readonly policy?: ActivePolicy
  /** What follows a decision that leaves the call work (default `fork`). */
  readonly follow?: Follow
  /** The call joins the open-call index with its wake (a background proposal: its result is owed on the session). */
  readonly index?: boolean
}

/** What handling one command did. */
export interface Handled {
  readonly reply: Reply
  /** The facts after the commit that holds the decision's events, or null when it wrote nothing. */
  readonly committed: Loaded | null
  /** Set when the decision left the call work: how to read it first. */
  readonly drive: "cached" | "fresh" | null
  /** With `follow: "await"`: where the drive left the call. */
  readonly driven: Driven | null
}

/**
 * The one write port for commands (heldcall/Decide.ts): `handle(heldId, command)` loads the
 * call's facts, decides, commits the events as one append with the expected sequence of the
 * facts decided on, decides again on a conflict (503 after `MaxAttempts`), and, when the
 * decision leaves the call work, writes its wake and drives it. Protocol handlers are decode,
 * authenticate, `handle`; the presence watch, the policy re-evaluation walk and a proposal's
 * nested-call edge use it too. (A nested call's end is decided on its parent from inside the
 * child's drive, through the same `decideAndCommit`: the driver cannot depend on this port.)
 *
 * Two ways to commit. Most commands commit under the call's in-process lock and then drive.
 * An attestation that counts, and a root proposal answered inline, are handed to the drive
 * instead (`Driver.driveFrom`): their events join the drive's first commit with what they
 * enable up to its first I/O (a proposal with its verdict and execution claim; an approval
 * with the readiness and claim it releases), so an ALLOW is one commit before the tool.
 *
 * The time a decision sees is the clock service's (Effect's `Clock`), read per attempt.
 */
export class HeldCalls extends Context.Tag("wk/HeldCalls")<
  HeldCalls,
  {
    readonly handle: (heldId: string, command: Command, options?: HandleOptions) => Effect.Effect<Handled, LedgerError>
  }
>() {}

/** How a command's follow-up drive is announced: a wake that says who drives (others leave the call until the lease ends), a plain wake, or none (the drive's own claim writes one). */
const wakeOf = (c: Command, follow: Follow): "driving" | "plain" | "none" => {
  switch (c._tag) {
    case "Attest":
    case "Settle":
      return "driving"
    case "Propose":
      // A nested call must report its end to its parent even if this process stops; a root
      // call answered inline is claimed (with its wake) or parked (with its wake) by the drive.
      return c.edge !== undefined || follow === "fork" ? "plain" : "none"
    default:
      return "plain"
  }
}

/** Commands whose events join the first commit of the drive they enable (see `HeldCalls`). */
const handsOver = (c: Command, follow: Follow) => (c._tag === "Attest" && follow === "fork") || (c._tag === "Propose" && c.edge === undefined && follow === "await")

/** What committing a handed-over decision did: the facts after its commit, and whether a drive took its events. */
interface Written {
  readonly committed: Loaded | null
  readonly handed: boolean
  readonly driven: Driven | null
}

/** A decision that wrote nothing (or met too many conflicts): no commit, no drive. */
const NothingWritten: Written = { committed: null, handed: false, driven: null }

export const makeHeldCalls = Effect.gen(function* () {
  const store = yield* HeldCallStore
  const driver = yield* Driver
  const wakes = yield* Wakes
  const openIndex = yield* OpenIndex
  const policies = yield* PolicyStore
  const { owner, leaseMs } = yield* KernelConfig
  const clock = yield* Effect.clock

  /**
   * Decides on this process's view and hands the events to a drive of the call, which commits
   * them in its first commit. With `fork` the drive runs on after the answer, which waits only
   * until that commit is durable; with `await` the answer waits for the drive. A conflict on that
   * commit (nothing written) decides again on fresh facts. A decision that leaves no work (a
   * rejected attestation) is committed as usual.
   */
  const handOver = (heldId: string, command: Command, follow: Follow, contextAt: () => DecideContext) =>
    decideUntilCommitted(store, heldId, command, contextAt, (loaded, decision): Effect.Effect<Written, LedgerError | AppendConflict> => {
      if (decision.drive === undefined) return Effect.map(store.serialized(heldId, store.append(loaded, decision.events)), (committed) => ({ committed, handed: false, driven: null }))
      if (follow === "await") return Effect.map(driver.driveFrom(heldId, { base: loaded, pending: decision.events }), (driven) => ({ committed: null, handed: true, driven }))
      return Effect.gen(function* () {
        const firstCommit = yield* Deferred.make<Loaded, LedgerError | AppendConflict>()
        yield* Effect.forkDaemon(driver.driveFrom(heldId, { base: loaded, pending: decision.events, firstCommit }).pipe(Effect.ignore))
        const committed = yield* Deferred.await(firstCommit)
        return { committed, handed: true, driven: null }
      })
    }).pipe(Effect.map(({ decision, written }) => ({ decision, ...(written ?? NothingWritten) })))

  const handle = (heldId: string, command: Command, options: HandleOptions = {}) =>
    Effect.gen(function* () {
      const policy = options.policy ?? (yield* policies.current)
      const contextAt = () => decideContextOf(policy, clock.unsafeCurrentTimeMillis())
      const follow = options.follow ?? "fork"
      const { decision, committed, handed, driven: handedDriven } = handsOver(command, follow)
        ? yield* handOver(heldId, command, follow, contextAt)
        : { ...(yield* decideAndCommit(store, heldId, command, contextAt)), handed: false, driven: null }
      const drive = decision.drive ?? null
      let driven: Driven | null = handedDriven
      const wake = wakeOf(command, follow)
      const driving = () => ({ owner, until: clock.unsafeCurrentTimeMillis() + leaseMs })
      if (handed) {
        // The drive has the events. A commit that claimed the call wrote its own wake in the
        // same flush; otherwise the wake lets another process finish the call if this one stops.
        if (wake !== "none" && committed !== null && beforeDispatch(committed.facts)) yield* wakes.begin(heldId, wake === "driving" ? driving() : undefined)
      } else if (drive !== null && follow !== "none") {
        if (options.index === true) yield* openIndex.add(heldId)
        const announce = wake === "none" ? "none" : wake === "driving" ? { driving: driving() } : {}
        driven = yield* wakeAndDrive(wakes, driver.drive, heldId, drive, follow, announce)
      } else if (committed !== null) {
        // No drive follows: the commit is projected here, and an ended call with nothing left
        // to happen (an acknowledged delivery) leaves the open-call index.
        yield* store.project(committed)
        if (committed.facts.held && quiescent(committed.facts)) yield* openIndex.remove(heldId).pipe(Effect.ignore)
      }
      return { reply: decision.reply, committed, drive, driven } satisfies Handled
    })

  return HeldCalls.of({ handle })
})

export const layerHeldCalls = Layer.effect(HeldCalls, makeHeldCalls)
