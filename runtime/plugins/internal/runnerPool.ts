import { PluginRunner, type HostHandler, type RawOutcome, type Runner, type RunnerSpec } from "./pluginRunner.js"

/** Workers per plugin: one slow call leaves another to the calls behind it. */
export const PoolSize = 2

/**
 * Several workers of one plugin: a call goes to an idle worker, or, when every worker is busy,
 * to a new one started from the compiled module (up to `PoolSize`; then to the least busy). So a call
 * that runs long, within its limits, delays only calls queued on its own worker, never the
 * event loop and never every other call of the plugin. Each worker keeps its own watchdog.
 */
export class RunnerPool implements Runner {
  readonly #spec: RunnerSpec
  readonly #size: number
  readonly #runners: Array<PluginRunner>
  #starting: Promise<PluginRunner> | undefined
  #closed = false

  private constructor(spec: RunnerSpec, size: number, first: PluginRunner) {
    this.#spec = spec
    this.#size = size
    this.#runners = [first]
  }

  /** Starts the first worker; rejects with the instantiation error. */
  static async start(spec: RunnerSpec, size = PoolSize): Promise<RunnerPool> {
    return new RunnerPool(spec, size, await PluginRunner.start(spec))
  }

  call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const least = this.#leastBusy()
    if (least.inFlight === 0 || this.#closed || this.#runners.length >= this.#size) return least.call(exportName, input, timeoutMs, host)
    // Every worker is busy: the call takes whichever is free first, a new worker or a busy one
    // finishing (a long call may run for seconds; a new worker starts in tens of ms).
    return Promise.race([this.#grow().catch(() => undefined), least.idle()]).then(() => this.#leastBusy().call(exportName, input, timeoutMs, host))
  }

  #leastBusy(): PluginRunner {
    return this.#runners.reduce((a, b) => (b.inFlight < a.inFlight ? b : a))
  }

  /** Starts one more worker (once, however many calls ask), adding it to the pool. */
  #grow(): Promise<PluginRunner> {
    this.#starting ??= PluginRunner.start(this.#spec).then(
      (r) => {
        this.#starting = undefined
        if (this.#closed) void r.close()
        else this.#runners.push(r)
        return r
      },
      (e: unknown) => {
        this.#starting = undefined
        throw e
      }
    )
    return this.#starting
  }

  async close(): Promise<void> {
    this.#closed = true
    const late = await this.#starting?.catch(() => undefined)
    await Promise.all([...this.#runners, ...(late !== undefined ? [late] : [])].map((r) => r.close()))
  }
}
