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
 * Opens and closes hostile-plugin windows through the protocol, the way an organization would:
 * pinning a plugin narrows (applied at once); unpinning it widens, so a second admin approves
 * the change as a held call of `kernel_policy_apply`. Each restore differs from the last (a
 * marker grant) so that every change is its own held call.
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
    const hostile: Profile = { ...this.current, plugins: [...(this.current.plugins ?? []), pin] }
    const t0 = Date.now()
    const r0 = await retrying(`pin ${pin.name}`, async () => {
      const r = (await this.root.applyPolicy(hostile as never).catch((e) => { this.once(`pin ${pin.name}: ${String(e)}`); throw e })) as Applied
      if (r.status !== 200) this.once(`pin ${pin.name}: ${JSON.stringify(r).slice(0, 300)}`)
      if (r.status === 200) return r
      if (r.status >= 400 && r.status < 500) throw new Error(`pin ${pin.name} refused: ${JSON.stringify(r)}`)
      return undefined
    }, deadline)
    this.current = hostile
    this.opened++
    return `${pin.name} (${r0.attempts} attempts, ${Date.now() - t0} ms)`
  }

  /** Restores the base policy (plus a marker grant); a second admin approves the widening. */
  async close(k: number, deadline: number): Promise<void> {
    const grants = { ...this.base.grants, "agent:mallory": [`chaos_window_${k}`] }
    const restored: Profile = { ...this.base, grants }
    const proposed = await retrying("restore policy", async () => {
      const r = (await this.root.applyPolicy(restored as never)) as Applied
      if (r.status === 200 || r.status === 202) return r
      if (r.status >= 400 && r.status < 500 && r.status !== 409) throw new Error(`restore refused: ${JSON.stringify(r)}`)
      return undefined
    }, deadline)
    const heldId = proposed.value.held_id
    if (proposed.value.status === 202 && heldId !== undefined) {
      await retrying("approve the restore", async () => {
        const a = await this.approver.decide(heldId, "admin")
        return a.disposition === "accepted" || a.disposition === "duplicate" || a.disposition === "stale" ? a : undefined
      }, deadline)
      await retrying("restore applied", async () => ((await this.root.get(heldId)).held?.["lifecycle"] === "completed" ? true : undefined), deadline)
    }
    this.current = restored
  }
}
