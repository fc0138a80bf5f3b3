import { Effect, Fiber, ManagedRuntime } from "effect"
import { layerKernel, runKernel, type KernelOptions } from "../../runtime/Kernel.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Roles } from "./TestNats.js"

export interface InProcessKernel {
  readonly runtime: ManagedRuntime.ManagedRuntime<any, any>
  readonly stop: () => Promise<void>
}

/** A kernel running in the test process (same code as `wk kernel`), stopped by interrupting it. */
export const startKernel = async (servers: string, profiles: ReadonlyArray<Profile>, extra: Partial<KernelOptions> = {}): Promise<InProcessKernel> => {
  const runtime = ManagedRuntime.make(layerKernel({ nats: { servers, ...Roles.kernel }, profiles, ...extra }))
  const fiber = await runtime.runPromise(Effect.forkDaemon(Effect.scoped(Effect.zipRight(runKernel, Effect.never))))
  // Let subscriptions reach the server before tests send requests.
  await runtime.runPromise(Effect.sleep(50))
  return {
    runtime,
    stop: async () => {
      await runtime.runPromise(Fiber.interrupt(fiber))
      await runtime.dispose()
    }
  }
}
