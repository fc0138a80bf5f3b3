import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import type { KernelOptions } from "../../runtime/Kernel.js"
import { ControllerConsumer } from "../../runtime/ledger/Provision.js"
import { Buckets, Streams } from "../../runtime/schema/Subjects.js"
import { startKernel, type InProcessKernel } from "./InProcessKernel.js"
import { connectParties, type Parties } from "./Parties.js"
import { testProfile } from "./Principals.js"
import { startTestNats, type TestNats } from "./TestNats.js"

/** A NATS server of its own, `kernels` in-process kernels on the test organization's profile (one queue group), and the parties around them. */
export interface Deployment {
  readonly nats: TestNats
  readonly kernels: ReadonlyArray<InProcessKernel>
  readonly parties: Parties
  /** No wake is pending or scheduled: nothing will drive any call again until a new event. */
  readonly controllerIdle: () => Promise<boolean>
  /** The call is in the open-call index (what a policy change and the recovery sweep revisit). */
  readonly openIndexHas: (heldId: string) => Promise<boolean>
  /** Stops the kernels, closes the parties' connections and the server. */
  readonly stop: () => Promise<void>
}

export const startDeployment = async (kernels: number, extra: Partial<KernelOptions> = {}): Promise<Deployment> => {
  const nats = await startTestNats()
  const started: Array<InProcessKernel> = []
  for (let i = 0; i < kernels; i++) started.push(await startKernel(nats.servers, [testProfile()], extra))
  const parties = await connectParties(nats.servers)
  return {
    nats,
    kernels: started,
    parties,
    controllerIdle: async () => {
      const info = await (await jetstreamManager(parties.kernelConn)).consumers.info(Streams.wakes, ControllerConsumer)
      return info.num_pending === 0 && info.num_ack_pending === 0
    },
    openIndexHas: async (heldId) => {
      const e = await (await new Kvm(parties.kernelConn).open(Buckets.open)).get(heldId)
      return e !== null && e.operation === "PUT"
    },
    stop: async () => {
      await Promise.all(started.map((k) => k.stop()))
      await parties.close()
      await nats.dispose()
    }
  }
}
