import { Context, Effect, Layer } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import type { LedgerError } from "../ledger/LedgerError.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { Wakes } from "../ledger/Wakes.js"
import { quiescent } from "../heldcall/Facts.js"
import type { Command } from "../heldcall/Decide.js"
import { decideContextOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { Reply } from "../schema/Reply.js"
import { KernelConfig } from "../KernelConfig.js"
import { Driver, type Driven } from "./Driver.js"
import { decideAndCommit } from "./internal/decideAndCommit.js"
import { wakeAndDrive, type Follow } from "./internal/wakeAndDrive.js"

export type { Follow } from "./internal/wakeAndDrive.js"


export interface HandleOptions {
  /** The policy the command was authenticated under (default: the policy this process holds now). */
  readonly policy?: ActivePolicy
  readonly follow?: Follow
}

/** What handling one command did. */
export interface Handled {
  readonly reply: Reply
  /** The facts after the decision's commit, or null when it wrote nothing. */
  readonly committed: Loaded | null
  /** Set when the decision left the call work: how to read it first. */
  readonly drive: "cached" | "fresh" | null
  /** With `follow: "await"`: where the drive left the call. */
  readonly driven: Driven | null
}

/**
 * The one write port for commands (heldcall/Decide.ts): `handle(heldId, command)` locks the call
 * in this process, loads its facts, decides, commits the events as one append with the expected
 * sequence, decides again on a conflict, and, when the decision leaves the call work, writes its
 * wake and drives it. Protocol handlers are decode, authenticate, `handle`; the presence watch,
 * the policy re-evaluation and a proposal's nested-call edge use it too. (A nested call's end is
 * decided on its parent from inside the child's drive, through the same `decideAndCommit`.)
 *
 * The time a decision sees is this process's clock, read per attempt.
 */
export class HeldCalls extends Context.Tag("wk/HeldCalls")<
  HeldCalls,
  {
    readonly handle: (heldId: string, command: Command, options?: HandleOptions) => Effect.Effect<Handled, LedgerError>
  }
>() {}

/**
 * Wakes written for commands whose follow-up drive claims the call at once carry who drives it
 * (another kernel leaves the call to this one until the lease ends); others are plain.
 */
const drivesAtOnce = (c: Command) => c._tag === "Attest" || c._tag === "Settle"

export const makeHeldCalls = Effect.gen(function* () {
  const store = yield* HeldCallStore
  const driver = yield* Driver
  const wakes = yield* Wakes
  const openIndex = yield* OpenIndex
  const policies = yield* PolicyStore
  const { owner, leaseMs } = yield* KernelConfig

  const handle = (heldId: string, command: Command, options: HandleOptions = {}) =>
    Effect.gen(function* () {
      const policy = options.policy ?? (yield* policies.current)
      const { decision, committed } = yield* decideAndCommit(store, heldId, command, () => decideContextOf(policy, Date.now()))
      const drive = decision.drive ?? null
      let driven: Driven | null = null
      if (drive !== null && options.follow !== "none") {
        const driving = drivesAtOnce(command) ? { owner, until: Date.now() + leaseMs } : undefined
        driven = yield* wakeAndDrive(wakes, driver.drive, heldId, drive, options.follow ?? "fork", driving)
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
