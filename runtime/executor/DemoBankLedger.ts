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

/** Where the demo bank keeps its books, so a restart of the bank (or of `wk start`) resets nothing unasked. */
export interface DemoBankLedger {
  /**
   * Every applied transfer (by idempotency key) recorded so far, and the balances the ones since
   * the last reset left (accounts not named since are at their opening balance).
   */
  readonly load: () => Promise<{ readonly balances: ReadonlyMap<string, number>; readonly transfers: ReadonlyMap<string, Transfer> }>
  /** Records one applied transfer (with the two balances it left), before the bank replies. */
  readonly record: (idempotencyKey: string, t: Transfer) => Promise<void>
  /**
   * Puts every account back at its opening balance (`wk demo reset`). Applied transfers stay
   * recorded under their idempotency keys, so a retried call is still answered with what it did
   * and never moves money twice.
   */
  readonly reset: () => Promise<void>
  /** Calls `f` on every later reset (a running bank clears its balances); stops when the returned function is called. */
  readonly onReset: (f: () => void) => Promise<() => void>
}

/** The KV bucket the demo bank's books live in. */
export const DemoBankBucket = "wk_demo_bank"

// KV keys allow [-/_=.A-Za-z0-9]: account names and idempotency keys are stored base64url-encoded.
const enc = (s: string) => Buffer.from(s, "utf8").toString("base64url")
const dec = (s: string) => Buffer.from(s, "base64url").toString("utf8")

/** The key whose revision marks the last reset: transfers stored before it no longer set a balance. */
const ResetKey = "reset"

/** The demo bank's books in the `wk_demo_bank` KV bucket (created when missing), over `nc`. */
export const kvDemoBankLedger = async (nc: NatsConnection): Promise<DemoBankLedger> => {
  const kv: KV = await new Kvm(nc).create(DemoBankBucket, { history: 1 })
  return {
    load: async () => {
      const resetAt = (await kv.get(ResetKey))?.revision ?? 0
      const transfers = new Map<string, Transfer>()
      const since: Array<Transfer> = []
      for await (const key of await kv.keys("transfer.>")) {
        const e = await kv.get(key)
        if (e === null || e.operation !== "PUT") continue
        transfers.set(dec(key.slice("transfer.".length)), e.json<Transfer>())
        if (e.revision > resetAt) since.push(e.json<Transfer>())
      }
      // Each transfer records the balances it left; the latest one naming an account is its balance.
      const balances = new Map<string, number>()
      for (const t of since.sort((a, b) => Number(a.transfer_id.slice(1)) - Number(b.transfer_id.slice(1)))) balances.set(t.from, t.balance_from).set(t.to, t.balance_to)
      return { balances, transfers }
    },
    // One put per transfer: it is applied and remembered under its idempotency key together.
    record: async (idempotencyKey, t) => void (await kv.put(`transfer.${enc(idempotencyKey)}`, JSON.stringify(t))),
    reset: async () => void (await kv.put(ResetKey, JSON.stringify({ at: new Date().toISOString() }))),
    onReset: async (f) => {
      const updates = await kv.watch({ key: ResetKey, include: "updates" })
      void (async () => {
        for await (const e of updates) if (e.operation === "PUT") f()
      })()
      return () => updates.stop()
    }
  }
}
