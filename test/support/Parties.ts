import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { clientFor, connectAs } from "./Principals.js"

/**
 * Everyone around a kernel in an end-to-end test, each on its own login: alice proposes (agent),
 * carol witnesses (witness), the demo bank serves `money_transfer` (bank), and a kernel-role
 * connection reads the streams the way an operator would.
 */
export interface Parties {
  readonly alice: WitnessClient
  readonly carol: WitnessClient
  readonly bank: DemoBank
  readonly agentConn: NatsConnection
  readonly witnessConn: NatsConnection
  readonly kernelConn: NatsConnection
  /** Stops the bank and closes every connection. */
  readonly close: () => Promise<void>
}

export const connectParties = async (servers: string): Promise<Parties> => {
  const toolConn = await connectAs(servers, "bank")
  const bank = new DemoBank().serve(toolConn)
  const agentConn = await connectAs(servers, "agent")
  const witnessConn = await connectAs(servers, "witness")
  const kernelConn = await connectAs(servers, "kernel")
  return {
    alice: clientFor(agentConn, "agent:alice"),
    carol: clientFor(witnessConn, "user:carol"),
    bank,
    agentConn,
    witnessConn,
    kernelConn,
    close: async () => {
      bank.stop()
      await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c.close()))
    }
  }
}
