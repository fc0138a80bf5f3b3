import { startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { killOnExit } from "./KillOnExit.js"

/**
 * The soak's kernel processes: a fixed number of slots, each running `wk kernel` as its own OS
 * process. A crash is SIGKILL (no drain, no finalizers); the slot restarts after a pause, as a
 * supervisor would restart it. Counts crashes and recoveries (a restarted kernel that is ready).
 */
export class KernelPool {
  private readonly slots: Array<KernelProcess | null>
  private readonly restarting = new Set<number>()
  private readonly all: Array<KernelProcess> = []
  private stopped = false
  crashes = 0
  recoveries = 0

  constructor(
    private readonly size: number,
    private readonly serversOf: (slot: number) => string,
    private readonly profiles: string,
    private readonly env: Record<string, string>,
    private readonly log: (line: string) => void
  ) {
    this.slots = Array.from({ length: size }, () => null)
  }

  private readonly unregister = killOnExit(() => this.all.map((k) => k.pid))

  async start(): Promise<void> {
    await Promise.all(this.slots.map((_, i) => this.boot(i)))
  }

  private async boot(slot: number): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        const k = await startKernelProcess(this.serversOf(slot), this.profiles, this.env)
        this.all.push(k)
        if (this.stopped) return void (await k.kill())
        this.slots[slot] = k
        return
      } catch (e) {
        // NATS may be down at that moment (a fault of its own); try again shortly.
        if (attempt % 5 === 0) this.log(`kernel slot ${slot} failed to start (attempt ${attempt}): ${String(e).split("\n")[0]}`)
        await new Promise((r) => setTimeout(r, 500))
      }
    }
  }

  /** The slots that have a running kernel. */
  live(): Array<number> {
    return this.slots.flatMap((k, i) => (k === null ? [] : [i]))
  }

  /** SIGKILLs the kernel in `slot` (if running) and restarts it after `downMs`. */
  crash(slot: number, downMs: number): boolean {
    const k = this.slots[slot]
    if (k === null || k === undefined) return false
    this.slots[slot] = null
    this.crashes++
    process.kill(k.pid, "SIGKILL")
    if (!this.restarting.has(slot)) {
      this.restarting.add(slot)
      void new Promise((r) => setTimeout(r, downMs))
        .then(() => this.boot(slot))
        .then(() => {
          this.restarting.delete(slot)
          if (!this.stopped) this.recoveries++
        })
    }
    return true
  }

  /** Waits until every slot runs a kernel again. */
  async settled(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.live().length < this.size || this.restarting.size > 0) {
      if (Date.now() > deadline) throw new Error(`kernels did not all come back within ${timeoutMs} ms`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  /** Every kernel output ever started, newest last (for debugging a failed soak). */
  outputs(): ReadonlyArray<string> {
    return this.all.map((k) => k.output())
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.all.map((k) => k.kill()))
    this.unregister()
  }
}
