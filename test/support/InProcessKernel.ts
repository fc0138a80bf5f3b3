import { PolicyStore } from "../../runtime/policy/PolicyStore.js"
import type { ActivePolicy } from "../../runtime/policy/ActivePolicy.js"
import { Effect, Fiber, type Layer, ManagedRuntime } from "effect"
import { join } from "node:path"
import { layerKernel, publishLocalPlugins, runKernel, type KernelOptions } from "../../runtime/Kernel.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Roles } from "./TestNats.js"

export interface InProcessKernel {
  readonly runtime: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof layerKernel>>, Layer.Layer.Error<ReturnType<typeof layerKernel>>>
  readonly stop: () => Promise<void>
  /** The policy in force, read from the store (what the kernel decides the next call under). */
  readonly policy: () => Promise<ActivePolicy>
}

/** A kernel running in the test process (same code as `wk kernel`), stopped by interrupting it. */
export const startKernel = async (servers: string, profiles: ReadonlyArray<Profile>, extra: Partial<KernelOptions> = {}): Promise<InProcessKernel> => {
  const runtime = ManagedRuntime.make(layerKernel({ nats: { servers, ...Roles.kernel }, profiles, ...extra }))
  // Plugins are loaded by digest from the object store, as `wk start` publishes them.
  await runtime.runPromise(publishLocalPlugins(join(repoRoot, "plugins")))
  const fiber = await runtime.runPromise(Effect.forkDaemon(Effect.scoped(Effect.zipRight(runKernel, Effect.never))))
  // Let subscriptions reach the server before tests send requests.
  await runtime.runPromise(Effect.sleep(50))
  return {
    runtime,
    policy: () => runtime.runPromise(Effect.flatMap(PolicyStore, (store) => store.refresh)),
    stop: async () => {
      await runtime.runPromise(Fiber.interrupt(fiber))
      await runtime.dispose()
    }
  }
}
