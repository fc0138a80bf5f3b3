// The client every example shares: agent:alice of the example profiles (profiles/acme-org.json),
// signing with its development key, over the NATS server in NATS_URL (`npm start`'s by default).
import { WitnessClient } from "witness-kernel/client"
import { devKeyPair } from "witness-kernel/dev-keys"

export const connectAlice = () =>
  WitnessClient.connect({
    servers: process.env.NATS_URL ?? "127.0.0.1:4322",
    user: "agent",
    pass: "agent-dev",
    principal: "agent:alice",
    // 64 bytes: a key file's secret_key (base64) from `wk keygen`, or a development key.
    secretKey: devKeyPair("agent:alice").secretKey
  })

/** A transfer the example policy allows at once (up to 1,000); above that a person must approve. */
export const transfer = { from: "alice", to: "bob", amount: 250 }
