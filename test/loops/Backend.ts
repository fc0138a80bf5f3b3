import { type Context, type Effect, Layer, type Scope } from "effect"
import type { LedgerPorts } from "../../runtime/ledger/LedgerPorts.js"
import { layerDriver, type Driver } from "../../runtime/loops/Driver.js"
import { layerHeldCalls, type HeldCalls } from "../../runtime/loops/HeldCalls.js"
import type { PolicyStore } from "../../runtime/policy/PolicyStore.js"
import type { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { layerAdmitAll, type Admission } from "../../runtime/policy/Admission.js"
import { layerRuleAdjudicator } from "../../runtime/policy/RuleAdjudicator.js"
import { layerKernelConfig, type KernelConfig } from "../../runtime/KernelConfig.js"
import { HeldIds } from "../../runtime/protocol/HeldIds.js"
import { heldIdOf, heldIdSaltOf } from "../../runtime/schema/Canonical.js"
import { Nats } from "../../runtime/ledger/Nats.js"
import type { FakeTool } from "./FakeTool.js"

/** The services the loop suite runs on: every ledger port and what the driver needs beside them. */
export type LoopEnv = Nats | LedgerPorts | Driver | HeldCalls | PolicyStore | Adjudicator | Admission | KernelConfig | HeldIds

/** Tunables a test sets on the kernel it runs. */
export interface LoopConfig {
  readonly executorPaused: () => boolean
}

/** Where the loop suite runs: the memory ledger under `TestClock`, or a real nats-server. */
export interface Backend {
  readonly name: string
  /** Declares one test: `body` runs with a fresh kernel's services, in a scope. */
  readonly test: (name: string, config: Partial<LoopConfig>, body: Effect.Effect<void, unknown, LoopEnv | Scope.Scope>) => void
  /** Serves a fake tool for the rest of the test. */
  readonly serve: (tool: FakeTool) => Effect.Effect<void, unknown, LoopEnv | Scope.Scope>
  /**
   * Lets time pass until `probe` gives a value (at most `budgetMs` of kernel time): memory moves
   * `TestClock` (and `Date`) in steps; NATS waits in real time.
   */
  readonly eventually: <A, E, R>(probe: Effect.Effect<A | undefined, E, R>, budgetMs: number) => Effect.Effect<A, E | Error, R>
  /** The agent of a session connects (its presence can be probed); the effect it returns disconnects it. */
  readonly connectSession: (sessionId: string) => Effect.Effect<Effect.Effect<void>, unknown, Scope.Scope>
}


/** Held ids keyed with a fixed secret (no provisioned secret needed). */
export const layerTestHeldIds = Layer.succeed(
  HeldIds,
  HeldIds.of({
    of: (c) => {
      const salt = heldIdSaltOf(TestSecret, c.principal, c.session_id, c.turn_id, c.call_id)
      return { heldId: heldIdOf(c.principal, c.session_id, c.turn_id, c.call_id, salt), salt }
    }
  })
)
const TestSecret = new Uint8Array(32).fill(7)

/**
 * For the memory backend: the protocol handlers the suite calls still name the connection (a
 * blocking propose follows the call's events on it), though the suite never uses that path.
 * Any use is a defect.
 */
export const layerNoNats = Layer.succeed(
  Nats,
  new Proxy({} as Context.Tag.Service<typeof Nats>, {
    get: (_, field) => {
      throw new Error(`the memory ledger has no NATS connection (Nats.${String(field)})`)
    }
  })
)

/** The kernel's services over a given ledger and policy store, as `layerKernel` wires them. */
export const layerLoops = <ROut, E>(ledger: Layer.Layer<ROut | Nats | LedgerPorts | PolicyStore, E>, config: LoopConfig) =>
  layerHeldCalls.pipe(Layer.provideMerge(layerDriver.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        ledger,
        layerRuleAdjudicator,
        layerAdmitAll,
        layerTestHeldIds,
        layerKernelConfig({ owner: "k-loops", leaseMs: 2_000, toolTimeoutMs: 1_000, sweepIntervalMs: 0, presenceIntervalMs: 60_000, executorPaused: config.executorPaused })
      )
    )
  )))
