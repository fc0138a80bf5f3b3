import type { HeldEvent } from "../schema/Events.js"
import type { Command, Decision } from "./Decide.js"

/** What follows a decision that leaves a call work: a drive forked to run on after the answer, a drive awaited, or none (the caller drives). */
export type Follow = "fork" | "await" | "none"

/** The wake written with a decision's commit: one that says who drives (others leave the call until the lease ends), a plain one, or none. */
export type Announce = "driving" | "plain" | "none"

/**
 * How one command's decision is committed and when its reply goes out. One path: a decision
 * that leaves the call work is committed by the drive that follows, as that drive's first commit
 * (with what the events enable up to the first I/O: a proposal with its verdict and execution
 * claim, an approval with the readiness and claim it releases), so an ALLOW is one commit before
 * the tool. Anything else is committed alone.
 */
export interface ReplyPath {
  /** The drive that follows commits the events (else they are committed alone, and the caller drives if anyone does). */
  readonly drive: boolean
  /** The reply waits for the drive to end (else only until the events are durable). */
  readonly awaitDrive: boolean
  /** The wake announced with the drive's first commit, so another process finishes the call if this one stops. */
  readonly announce: Announce
  /** Committed alone with nothing to drive: the commit is projected here, and a call left with nothing to happen leaves the open-call index. */
  readonly project: boolean
}

/** The wake a command's drive announces: an approval or a settlement says who drives; a root call answered inline is claimed (with its wake) or parked (with its wake) by the drive. */
const announceOf = (c: Command, follow: Follow): Announce => {
  switch (c._tag) {
    case "Attest":
    case "Settle":
      return "driving"
    case "Propose":
      // A nested call must report its end to its parent even if this process stops.
      return c.edge !== undefined || follow === "fork" ? "plain" : "none"
    default:
      return "plain"
  }
}

/** `replyPath(command, decision, follow)`: pure; the write port (loops/HeldCalls.ts) only performs it. */
export const replyPath = (command: Command, decision: Decision, follow: Follow): ReplyPath =>
  decision.drive === undefined || follow === "none"
    ? { drive: false, awaitDrive: false, announce: "none", project: decision.drive === undefined }
    : { drive: true, awaitDrive: follow === "await", announce: announceOf(command, follow), project: false }

/** The wake to write with a first commit of `events`: none when the commit carries the execution claim, whose own wake says who drives. */
export const announceWith = (announce: Announce, events: ReadonlyArray<HeldEvent>): Announce =>
  announce === "none" || events.some((e) => e.type === "effect.dispatched") ? "none" : announce
