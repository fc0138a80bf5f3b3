import type { MeteredRunner } from "./meteredRunner.js"
import type { HostHandler, RawOutcome, Runner } from "./pluginRunner.js"

/** How much of a plugin's work may run on the event loop. */
export interface InlineLimits {
  /** Fuel a call may spend on the event loop, in ms of `timeout_ms`, before it moves to a worker. */
  readonly fuelMs: number
  /** Inputs larger than this go straight to a worker (a scan of a large tool result runs long). */
  readonly maxInput: number
  /** Calls that overran the inline fuel or broke the instance before the plugin runs only on workers. */
  readonly maxOverruns: number
}

export const DefaultInlineLimits: InlineLimits = { fuelMs: 1, maxInput: 4 * 1024, maxOverruns: 3 }

/**
 * A fuel-metered plugin that answers most calls on the event loop and the rest on workers.
 *
 * A call first runs in-process under a small fuel budget (`InlineLimits.fuelMs`): no thread hand-off,
 * so it costs about a bare Extism call, and it occupies the event loop for at most that budget.
 * A call that spends it runs again from the start on the worker pool with its whole budget; the
 * plugin is a function of its input (no host function with an effect is granted), so the second
 * run's answer is the one the first would have given. A plugin that overruns or breaks its
 * instance `maxOverruns` times runs only on workers from then on: a hostile plugin costs
 * the event loop a bounded amount, once.
 */
export class InlineFirstRunner implements Runner {
  readonly #inline: MeteredRunner
  readonly #workers: Runner
  readonly #limits: InlineLimits
  #overruns = 0

  constructor(inline: MeteredRunner, workers: Runner, limits: InlineLimits = DefaultInlineLimits) {
    this.#inline = inline
    this.#workers = workers
    this.#limits = limits
  }

  /** Whether calls still run in-process first. */
  get inline(): boolean {
    return this.#overruns < this.#limits.maxOverruns
  }

  call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const { fuelMs, maxInput } = this.#limits
    if (!this.inline || input.length > maxInput || timeoutMs <= fuelMs) return this.#workers.call(exportName, input, timeoutMs, host)
    return this.#inline.call(exportName, input, fuelMs, host).then((first) => {
      if (first.status === "ok" || first.status === "plugin_error" || first.status === "no_output") return first
      this.#overruns++
      // Out of the inline fuel: the whole budget on a worker. A trap, a memory or a host fault is
      // the plugin's answer under any budget: kept as it is.
      return first.status === "timeout" ? this.#workers.call(exportName, input, timeoutMs, host) : first
    })
  }

  async close(): Promise<void> {
    await Promise.all([this.#inline.close(), this.#workers.close()])
  }
}
