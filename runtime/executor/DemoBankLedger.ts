import { Kvm, type KV } from "@nats-io/kv"
import type { NatsConnection } from "@nats-io/transport-node"

/** One applied transfer, as the bank remembers it under its idempotency key. */
export interface Transfer {
  readonly transfer_id: string
  readonly from: string
  readonly to: string
  readonly amount: number
  readonly balance_from: number
  readonly balance_to: number
}

/** Where the demo bank keeps its books, so a restart of the bank (or of `wk start`) resets nothing. */
export interface DemoBankLedger {
  /** Every balance and every applied transfer (by idempotency key) recorded so far. */
  readonly load: () => Promise<{ readonly balances: ReadonlyMap<string, number>; readonly transfers: ReadonlyMap<string, Transfer> }>
  /** Records one applied transfer (with the two balances it left), before the bank replies. */
  readonly record: (idempotencyKey: string, t: Transfer) => Promise<void>
}

/** The KV bucket the demo bank's books live in. */
export const DemoBankBucket = "wk_demo_bank"

// KV keys allow [-/_=.A-Za-z0-9]: account names and idempotency keys are stored base64url-encoded.
const enc = (s: string) => Buffer.from(s, "utf8").toString("base64url")
const dec = (s: string) => Buffer.from(s, "base64url").toString("utf8")

/** The demo bank's books in the `wk_demo_bank` KV bucket (created when missing), over `nc`. */
export const kvDemoBankLedger = async (nc: NatsConnection): Promise<DemoBankLedger> => {
  const kv: KV = await new Kvm(nc).create(DemoBankBucket, { history: 1 })
  return {
    load: async () => {
      const transfers = new Map<string, Transfer>()
      for await (const key of await kv.keys("transfer.>")) {
        const e = await kv.get(key)
        if (e !== null && e.operation === "PUT") transfers.set(dec(key.slice("transfer.".length)), e.json<Transfer>())
      }
      // Each transfer records the balances it left; the latest one naming an account is its balance.
      const balances = new Map<string, number>()
      const ordered = [...transfers.values()].sort((a, b) => Number(a.transfer_id.slice(1)) - Number(b.transfer_id.slice(1)))
      for (const t of ordered) balances.set(t.from, t.balance_from).set(t.to, t.balance_to)
      return { balances, transfers }
    },
    // One put per transfer: it is applied and remembered under its idempotency key together.
    record: async (idempotencyKey, t) => void (await kv.put(`transfer.${enc(idempotencyKey)}`, JSON.stringify(t)))
  }
}
