import { HttpServer } from "@effect/platform"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { layerGateway } from "../../runtime/gateway/Gateway.js"
import { signEnvelope } from "../../runtime/protocol/Authenticate.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { connectAs, testProfile } from "../support/Principals.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"

/** A real nats-server, an in-process kernel, the demo bank and the gateway on a free localhost port. */
export interface GatewayHarness {
  readonly url: string
  readonly nats: TestNats
  readonly bank: DemoBank
  readonly kernelConn: NatsConnection
  readonly stop: () => Promise<void>
}

export const startGatewayHarness = async (): Promise<GatewayHarness> => {
  const nats = await startTestNats()
  const kernel: InProcessKernel = await startKernel(nats.servers, [testProfile()])
  const toolConn = await connectAs(nats.servers, "bank")
  const kernelConn = await connectAs(nats.servers, "kernel")
  const bank = new DemoBank().serve(toolConn)
  const gateway = ManagedRuntime.make(layerGateway({ nats: { servers: nats.servers, ...Roles.gateway }, port: 0 }))
  const address = await gateway.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
  if (address._tag !== "TcpAddress") throw new Error("gateway is not on TCP")
  return {
    url: `http://127.0.0.1:${address.port}`,
    nats,
    bank,
    kernelConn,
    stop: async () => {
      await gateway.dispose()
      await kernel.stop()
      await Promise.all([toolConn.close(), kernelConn.close()])
      await nats.dispose()
    }
  }
}

/** A signed envelope as a dev principal would send it. */
export const signedAs = (principal: string, payload: Record<string, unknown>) => signEnvelope({ ...payload, principal }, devKeyPair(principal).secretKey)

let n = 0
/** A propose envelope for a transfer by agent:alice (above 1000 is held for a human). */
export const transfer = (amount: number, session = "s-gw", preferences?: Record<string, unknown>) =>
  signedAs("agent:alice", { op: "propose", session_id: session, turn_id: "t1", call_id: `gw${Date.now()}-${++n}`, tool: "money_transfer", args: { from: "alice", to: "bob", amount }, ...(preferences ? { preferences } : {}) })

export const post = async (url: string, body: unknown) => {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) })
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}
export const getJson = async (url: string) => {
  const r = await fetch(url)
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}
