import { connect, type ConnectionOptions, type NatsConnection } from "@nats-io/transport-node"
import { WitnessClient } from "../../runtime/client/Client.js"
import { devKeyPair, devPublicKey } from "../../runtime/client/DevKeys.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { inboxOptionOf } from "../../runtime/schema/Subjects.js"
import { Roles } from "./TestNats.js"

/** A registry entry for a dev principal. */
export const principal = (name: string, ...classes: Array<string>) => [name, { keys: [devPublicKey(name)], classes }] as const

/** The test organization: agents, humans, and the special witness classes. */
export const testProfile = (overrides: Partial<Profile> = {}): Profile => ({
  name: "test-org",
  layer: "organization",
  principals: Object.fromEntries([
    principal("agent:alice", "agent"),
    principal("agent:bob", "agent"),
    principal("agent:mallory", "agent"),
    principal("user:carol", "human"),
    principal("user:dave", "human"),
    principal("user:erin", "human"),
    principal("svc:fraud", "fraud"),
    principal("op:breakglass", "breakglass"),
    principal("compliance:zoe", "compliance"),
    principal("oncall:olga", "oncall"),
    principal("admin:root", "admin"),
    principal("admin:ops", "admin")
  ]),
  grants: { "agent:alice": ["money_transfer", "bank_balance"], "agent:bob": ["money_transfer"] },
  rules: {
    money_transfer: {
      amount_field: "amount",
      witness_above: 1000,
      deny_above: 100_000,
      contract: { rule: { class: "human" }, veto: ["compliance"] }
    }
  },
  admins: ["admin:root", "admin:ops"],
  ...overrides
})

/** Connects as a role user. */
export const connectAs = (servers: string, role: keyof typeof Roles, options: ConnectionOptions = {}): Promise<NatsConnection> =>
  connect({ servers: servers.split(","), ...Roles[role], name: `test ${role}`, ...inboxOptionOf(Roles[role].user), ...options })

/** A protocol client for a dev principal over a connection of the given role. */
export const clientFor = (nc: NatsConnection, name: string, timeoutMs?: number): WitnessClient =>
  WitnessClient.over(nc, { principal: name, secretKey: devKeyPair(name).secretKey, ...(timeoutMs !== undefined ? { timeoutMs } : {}) })
