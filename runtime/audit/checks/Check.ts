import type { Envelope } from "../../schema/Envelope.js"
import type { CheckName, Violation } from "../AuditReport.js"
import type { Traced } from "../HeldHistory.js"
import type { PolicyHistory } from "../PolicyHistory.js"

/** A delivery message as read from `WK_SESSIONS` (only the fields the checks look at). */
export interface DeliveryMessage {
  readonly seq: number
  readonly held_id: string
  readonly delivery_id: string
  readonly outcome: string | null
  readonly admission: string | null
  readonly result: unknown
  /** Store time (ms), when read from the stream. */
  readonly time?: number
  /** Its place in the call's chain and its signature, when signed (`valid`: the signature verifies under its key). */
  readonly chain?: { readonly prev_seq: number; readonly prev: string; readonly key: string; readonly valid: boolean }
}

/** What the checks know besides the held call itself. */
export interface CheckContext {
  readonly policy: PolicyHistory
  /** Deliveries by held id, when the sessions stream was read. */
  readonly deliveries?: ReadonlyMap<string, ReadonlyArray<DeliveryMessage>>
  /**
   * Store time (ms) of the oldest message the sessions stream still holds: deliveries published
   * before it may have aged out (its limits), so their absence proves nothing.
   */
  readonly deliveriesFrom?: number
  /**
   * When the events stream's bounds were read (ms): a delivery stored after it may belong to a
   * step of its call the replay did not read (the sessions stream is read after the events).
   */
  readonly eventsReadAt?: number
  /** Time of the newest event read (ms): later than this minus `settleMs` is still settling. */
  readonly newestAt: number
  /** How long the kernel may take to finish an outstanding step before it counts as missed. */
  readonly settleMs: number
  /**
   * Signature verdicts computed ahead (the replay verifies on the thread pool while it reads);
   * undefined for an envelope means "verify it now".
   */
  readonly verified?: (seq: number, env: Envelope) => boolean | undefined
  /** The server's store time (ms) of the commit at `seq`; 0 or absent: unknown (archived, exported). */
  readonly storedAt?: (seq: number) => number
}

/** Something a check could not decide (not a violation). */
export interface Unverified {
  readonly held_id: string
  readonly seqs: ReadonlyArray<number>
  readonly message: string
}

/** What one check found in one held call. */
export interface Finding {
  readonly checked: number
  readonly violations: ReadonlyArray<Violation>
  readonly unverified: ReadonlyArray<Unverified>
}

/** A pure check over one re-folded held call. */
export interface HeldCheck {
  readonly name: CheckName
  readonly run: (call: Traced, ctx: CheckContext) => Finding
}

/** Collects one check's findings for one call. */
export const collector = (check: CheckName, heldId: string) => new Collector(check, heldId)

/** Shared by every finding without violations or unverified items (most of them). */
const None: ReadonlyArray<never> = Object.freeze([])

// A class, not closures: one collector per check per call, on the replay's hot path; the lists
// are allocated on the first item.
class Collector {
  private violations: Array<Violation> | undefined
  private unverified: Array<Unverified> | undefined
  private checked = 0
  constructor(
    private readonly check: CheckName,
    private readonly heldId: string
  ) {}
  count(n = 1): void {
    this.checked += n
  }
  fail(seqs: ReadonlyArray<number>, message: string): void {
    ;(this.violations ??= []).push({ check: this.check, held_id: this.heldId, seqs: [...seqs], message })
  }
  unsure(seqs: ReadonlyArray<number>, message: string): void {
    ;(this.unverified ??= []).push({ held_id: this.heldId, seqs: [...seqs], message })
  }
  done(): Finding {
    return { checked: this.checked, violations: this.violations ?? None, unverified: this.unverified ?? None }
  }
}
