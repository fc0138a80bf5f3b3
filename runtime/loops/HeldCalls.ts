import { Context, Deferred, Effect, Layer } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../schema/LedgerError.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { quiescent } from "../heldcall/Facts.js"
import type { Command, Decision } from "../heldcall/Decide.js"
import { replyPath, type Follow, type ReplyPath } from "../heldcall/ReplyPath.js"
import { decideContextOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { Reply } from "../schema/Reply.js"
import { Driver, type Driven } from "./Driver.js"
import { decideUntilCommitted } from "./internal/decideAndCommit.js"

export type { Follow } from "../heldcall/ReplyPath.js"

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
 * decision leaves the call work, drives it. Protocol handlers are decode, authenticate, `handle`;
 * the presence watch and the policy re-evaluation walk use it too. (A nested call's end is
 * decided on its parent from inside the child's drive, through `decideAndCommit`: the driver
 * cannot depend on this port.)
 *
 * One commit path, decided by `replyPath` in the core (heldcall/ReplyPath.ts): a decision that
 * leaves the call work is handed to its drive (`Driver.driveFrom`), whose first commit carries
 * the events with what they enable up to the first I/O (an ALLOW is one commit before the tool)
 * and the wake that lets another process finish the call; the reply goes out once that commit
 * is durable, or once the drive ended (`follow: "await"`). Anything else is committed alone.
 *
 * The time a decision sees is the clock service's (Effect's `Clock`), read per attempt.
 */
export class HeldCalls extends Context.Tag("wk/HeldCalls")<
  HeldCalls,
  {
    readonly handle: (heldId: string, command: Command, options?: HandleOptions) => Effect.Effect<Handled, LedgerError>
  }
>() {}

/** What committing one decision did: the facts after its commit (when the reply did not wait for the drive), and where an awaited drive left the call. */
interface Written {
  readonly committed: Loaded | null
  readonly driven: Driven | null
}

const NothingWritten: Written = { committed: null, driven: null }

export const makeHeldCalls = Effect.gen(function* () {
  const store = yield* HeldCallStore
  const driver = yield* Driver
  const openIndex = yield* OpenIndex
  const policies = yield* PolicyStore
  const clock = yield* Effect.clock

  /** Performs a reply path: the decision's events committed alone, or handed to the drive that follows. */
  const commit = (heldId: string, path: ReplyPath, loaded: Loaded, decision: Decision, index: boolean): Effect.Effect<Written, LedgerError | AppendConflict> => {
    if (!path.drive) {
      if (decision.events.length === 0) return Effect.succeed(NothingWritten)
      return Effect.gen(function* () {
        const committed = yield* store.serialized(heldId, store.append(loaded, decision.events))
        if (path.project) {
          // Nothing follows: the commit is projected here, and an ended call with nothing left to
          // happen (an acknowledged delivery) leaves the open-call index.
          yield* store.project(committed)
          if (committed.facts.held && quiescent(committed.facts)) yield* openIndex.remove(heldId).pipe(Effect.ignore)
        }
        return { committed, driven: null }
      })
    }
    const handed = { base: loaded, pending: decision.events, announce: path.announce }
    const drive = path.awaitDrive
      ? Effect.map(driver.driveFrom(heldId, handed), (driven): Written => ({ committed: null, driven }))
      : Effect.gen(function* () {
          const firstCommit = yield* Deferred.make<Loaded, LedgerError | AppendConflict>()
          yield* Effect.forkDaemon(driver.driveFrom(heldId, { ...handed, firstCommit }).pipe(Effect.ignore))
          const committed = yield* Deferred.await(firstCommit)
          return { committed: decision.events.length > 0 ? committed : null, driven: null }
        })
    return index ? Effect.zipRight(openIndex.add(heldId), drive) : drive
  }

  const handle = (heldId: string, command: Command, options: HandleOptions = {}) =>
    Effect.gen(function* () {
      const policy = options.policy ?? (yield* policies.current)
      const contextAt = () => decideContextOf(policy, clock.unsafeCurrentTimeMillis())
      const follow = options.follow ?? "fork"
      const { decision, written } = yield* decideUntilCommitted(store, heldId, command, contextAt, (loaded, decision) => commit(heldId, replyPath(command, decision, follow), loaded, decision, options.index === true), { repeats: true })
      return { reply: decision.reply, committed: written?.committed ?? null, drive: decision.drive ?? null, driven: written?.driven ?? null } satisfies Handled
    })

  return HeldCalls.of({ handle })
})

export const layerHeldCalls = Layer.effect(HeldCalls, makeHeldCalls)
