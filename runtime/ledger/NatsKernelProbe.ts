import { Effect, Layer, Runtime } from "effect"
import { KernelProbe } from "../observability/KernelProbe.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { Streams } from "../schema/Subjects.js"
import { Nats } from "./Nats.js"
import { openCallsByState } from "./OpenCalls.js"
import { ControllerConsumer } from "./Provision.js"

/** The operator endpoints' probe over the kernel's connection and policy store (reads only). */
export const layerNatsKernelProbe = Layer.effect(
  KernelProbe,
  Effect.gen(function* () {
    const { nc, jsm, kv } = yield* Nats
    const runtime = yield* Effect.runtime<PolicyStore>()
    let connected = !nc.isClosed()
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect" || s.type === "close") connected = false
        else if (s.type === "reconnect") connected = true
      }
    })().catch(() => undefined)
    return {
      connected: () => connected && !nc.isClosed(),
      roundTrip: () => nc.flush(),
      streamsPresent: async () => {
        await Promise.all([Streams.events, Streams.sessions, Streams.wakes].map((s) => jsm.streams.info(s)))
      },
      consumerPending: async () => (await jsm.consumers.info(Streams.wakes, ControllerConsumer)).num_pending,
      policyEpoch: async () => (await Runtime.runPromise(runtime)(Effect.flatMap(PolicyStore, (s) => s.current))).epoch,
      openCallsByState: () => openCallsByState(kv)
    }
  })
)
