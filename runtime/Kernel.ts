import { Effect, Layer } from "effect"
import { layerKernelConfig, KernelConfig } from "./KernelConfig.js"
import { layerNats, Nats, type NatsOptions } from "./ledger/Nats.js"
import { layerHeldCallStore } from "./ledger/HeldCallStore.js"
import { provision } from "./ledger/Provision.js"
import { layerPolicyStore } from "./policy/PolicyStore.js"
import { layerRuleAdjudicator } from "./policy/RuleAdjudicator.js"
import { layerAdmitAll } from "./policy/Admission.js"
import { layerDriver } from "./loops/Driver.js"
import { runController } from "./loops/Controller.js"
import { serveProtocol } from "./protocol/Service.js"
import { serveStatus } from "./protocol/Status.js"
import type { Profile } from "./schema/Profile.js"
import type { Adjudicator } from "./policy/Adjudicator.js"
import type { Admission } from "./policy/Admission.js"

export interface KernelOptions {
  readonly nats: NatsOptions
  readonly profiles: ReadonlyArray<Profile>
  readonly config?: Partial<Parameters<typeof layerKernelConfig>[0]>
  /** Policy seams; default: the profile's rule adjudicator and admit-all. */
  readonly adjudicator?: Layer.Layer<Adjudicator>
  readonly admission?: Layer.Layer<Admission>
  readonly replicas?: number
}

/** Every service a kernel process runs on. Provisioning happens before the policy store reads its bucket. */
export const layerKernel = (opts: KernelOptions) => {
  const nats = layerNats(opts.nats)
  const provisioned = Layer.effectDiscard(provision(opts.replicas ?? 1)).pipe(Layer.provide(nats))
  const base = Layer.mergeAll(
    nats,
    layerKernelConfig(opts.config ?? {}),
    opts.adjudicator ?? layerRuleAdjudicator,
    opts.admission ?? layerAdmitAll
  )
  const stores = Layer.mergeAll(layerHeldCallStore, layerPolicyStore(opts.profiles)).pipe(Layer.provide(provisioned), Layer.provideMerge(base))
  return layerDriver.pipe(Layer.provideMerge(stores))
}

/** Serves the protocol and runs the controller until the scope closes. */
export const runKernel = Effect.gen(function* () {
  yield* serveProtocol
  yield* serveStatus
  yield* runController()
  const { owner } = yield* KernelConfig
  const { nc } = yield* Nats
  return { owner, server: nc.getServer() }
})
