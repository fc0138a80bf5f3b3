import type { JsonValue } from "../../runtime/schema/Json.js"
import type { InvokeReply, ReadbackReply } from "../../runtime/ledger/ToolClient.js"

/** What a fake tool does with one invoke. */
export type ToolTurn = { readonly reply: InvokeReply } | "lost" | "hang"

/**
 * A tool service stand-in with an idempotent effect per key: counts the effects it applied,
 * can lose its next replies (after applying) or hang before applying, and answers read-back
 * from what it applied. Both test backends serve it (memory: a function table; NATS: a subscriber).
 */
export class FakeTool {
  /** Effects applied, by idempotency key. */
  readonly applied = new Map<string, JsonValue>()
  invocations = 0
  /** Replies to lose (the effect still happens). */
  loseReplies = 0
  /** Invokes to leave unanswered without applying anything (the dispatcher is meant to die meanwhile). */
  hangInvokes = 0
  private isDown = false
  private readonly downWatchers: Array<(down: boolean) => void> = []
  /** Down: no tool service answers (invoke and read-back reach no one). */
  get down(): boolean {
    return this.isDown
  }
  set down(down: boolean) {
    if (down === this.isDown) return
    this.isDown = down
    this.downWatchers.forEach((w) => w(down))
  }
  /** Tells a backend that serves the tool when it goes down or comes back. */
  onDownChange(watch: (down: boolean) => void): void {
    this.downWatchers.push(watch)
  }
  /** Goes down right after the next reply it loses. */
  downAfterLostReply = false

  constructor(readonly name: string, readonly hasReadback = true) {}

  /** How many effects happened (one per key at most). */
  get effects(): number {
    return this.applied.size
  }

  invoke(idempotencyKey: string, args: unknown): ToolTurn {
    this.invocations++
    if (this.hangInvokes > 0) {
      this.hangInvokes--
      return "hang"
    }
    if (!this.applied.has(idempotencyKey)) this.applied.set(idempotencyKey, { done: true, args: args as JsonValue })
    const reply: InvokeReply = { ok: true, result: this.applied.get(idempotencyKey)! }
    if (this.loseReplies > 0) {
      this.loseReplies--
      if (this.downAfterLostReply) this.down = true
      return "lost"
    }
    return { reply }
  }

  readback(idempotencyKey: string): ReadbackReply {
    const r = this.applied.get(idempotencyKey)
    return r === undefined ? { applied: false } : { applied: true, result: r }
  }
}
