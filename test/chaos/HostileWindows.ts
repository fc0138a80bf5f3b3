import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { pinOf } from "../support/Pins.js"
import { retrying } from "./Retry.js"

/** The hostile plugins the soak pins for a while, one at a time: each must fail closed. */
export const hostilePins = [
  { fault: "timeout", pin: pinOf("fixtures/loop-forever", { stages: ["adjudicate"], timeout_ms: 20 }) },
  { fault: "memory", pin: pinOf("fixtures/memory-bomb", { stages: ["adjudicate"], memory_max_pages: 32 }) },
  { fault: "trap", pin: pinOf("fixtures/trap", { stages: ["adjudicate"] }) }
] as const

type Applied = { status: number; held_id?: string; policy_epoch?: number; error?: { code: string; message: string } }

/**
 * Opens and closes hostile-plugin windows through the protocol, the way an organization would.
 * Both widen: a new organization adjudicator's contract can stand in for the default one, and
 * unpinning it drops an adjudicator. So a second admin approves each change as a held call of
 * `kernel_policy_apply`. Each restore differs from the last (a marker grant) so that every
 * change is its own held call.
 */
export class HostileWindows {
  opened = 0
  private current: Profile
  private readonly said = new Set<string>()
  /** Logs a retry's cause once (NATS or every kernel may be down for seconds). */
  private once(line: string): void {
    if (this.said.has(line)) return
    this.said.add(line)
    this.log(`${line} (retrying)`)
  }

  constructor(
    private readonly root: WitnessClient,
    private readonly approver: WitnessClient,
    private readonly base: Profile,
    private readonly log: (line: string) => void = () => undefined
  ) {
    this.current = base
  }

  /** Pins hostile plugin `k % 3` on top of the current policy; resolves once applied. */
  async open(k: number, deadline: number): Promise<string> {
    const { pin } = hostilePins[k % hostilePins.length]!
    const t0 = Date.now()
    const attempts = await this.apply(`pin ${pin.name}`, { ...this.current, plugins: [...(this.current.plugins ?? []), pin] }, deadline)
    this.opened++
    return `${pin.name} (${attempts} attempts, ${Date.now() - t0} ms)`
  }

  /** Restores the base policy (plus a marker grant). */
  async close(k: number, deadline: number): Promise<void> {
    await this.apply("restore policy", { ...this.base, grants: { ...this.base.grants, "agent:mallory": [`chaos_window_${k}`] } }, deadline)
  }

  /** Applies `profile`; when the kernel holds the change, the second admin approves it. Resolves once applied. */
  private async apply(what: string, profile: Profile, deadline: number): Promise<number> {
    const proposed = await retrying(what, async () => {
      const r = (await this.root.applyPolicy(profile as never).catch((e) => { this.once(`${what}: ${String(e)}`); throw e })) as Applied
      if (r.status === 200 || r.status === 202) return r
      this.once(`${what}: ${JSON.stringify(r).slice(0, 300)}`)
      if (r.status >= 400 && r.status < 500 && r.status !== 409) throw new Error(`${what} refused: ${JSON.stringify(r)}`)
      return undefined
    }, deadline)
    const heldId = proposed.value.held_id
    if (proposed.value.status === 202 && heldId !== undefined) {
      await retrying(`approve: ${what}`, async () => {
        const a = await this.approver.decide(heldId, "admin")
        return a.disposition === "accepted" || a.disposition === "duplicate" || a.disposition === "stale" ? a : undefined
      }, deadline)
      await retrying(`applied: ${what}`, async () => ((await this.root.get(heldId)).held?.["lifecycle"] === "completed" ? true : undefined), deadline)
    }
    this.current = profile
    return proposed.attempts
  }
}
