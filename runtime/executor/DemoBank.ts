import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import { Subjects } from "../schema/Subjects.js"
import type { DemoBankLedger, Transfer } from "./DemoBankLedger.js"

export interface DemoBankOptions {
  /** Balance of an account the bank has not seen before. */
  readonly openingBalance?: number
  /**
   * Called after a transfer is applied and before the bank replies; a test uses it to kill
   * the kernel in the window between effect and record.
   */
  readonly onApplied?: (t: Transfer, idempotencyKey: string) => void | Promise<void>
  /** Called before a transfer is applied; returning "drop" ignores the request (no effect, no reply). */
  readonly onRequest?: (idempotencyKey: string) => "drop" | void
  /**
   * Where the books are kept (the `wk_demo_bank` KV bucket for `wk start`): every applied
   * transfer is recorded there before the bank replies, and `restore()` reads them back.
   * Without one the books are in memory only.
   */
  readonly ledger?: DemoBankLedger
}

/**
 * The demo bank tool service: `money_transfer` (honours idempotency keys, answers read-back)
 * and `bank_balance`. A stand-in for a real system of record: its books are in memory, and in
 * its ledger when it has one (so a restart resets no balance and applies no key twice).
 */
export class DemoBank {
  readonly balances = new Map<string, number>()
  readonly byKey = new Map<string, Transfer>()
  /** Every time a transfer actually moved money (a repeated key does not count). */
  effects = 0
  /** How many invoke requests arrived per idempotency key. */
  readonly invocations = new Map<string, number>()
  private subs: Array<Subscription> = []
  private stopFollowing: () => void = () => undefined

  constructor(private readonly opts: DemoBankOptions = {}) {}

  /**
   * Reads the books back from the ledger (balances and applied keys) and follows its resets
   * (`wk demo reset`: every balance back to the opening one); call before `serve`.
   */
  async restore(): Promise<this> {
    if (this.opts.ledger === undefined) return this
    const { balances, transfers } = await this.opts.ledger.load()
    for (const [a, b] of balances) this.balances.set(a, b)
    for (const [k, t] of transfers) this.byKey.set(k, t)
    this.stopFollowing = await this.opts.ledger.onReset(() => this.resetBalances())
    return this
  }

  /** Every account back at its opening balance; applied transfers stay remembered by key. */
  resetBalances(): void {
    this.balances.clear()
  }

  balance(account: string): number {
    return this.balances.get(account) ?? this.opts.openingBalance ?? 10_000
  }

  /** Applies a transfer once per idempotency key. */
  transfer(key: string, args: Record<string, unknown>): { ok: true; result: Transfer } | { ok: false; error: string } {
    const done = this.byKey.get(key)
    if (done !== undefined) return { ok: true, result: done }
    const { from, to, amount } = args
    if (typeof from !== "string" || typeof to !== "string" || typeof amount !== "number" || !(amount > 0)) {
      return { ok: false, error: "money_transfer needs {from: string, to: string, amount: number > 0}" }
    }
    if (this.balance(from) < amount) return { ok: false, error: `insufficient funds in ${from}` }
    const t: Transfer = {
      transfer_id: `t${this.byKey.size + 1}`,
      from,
      to,
      amount,
      balance_from: this.balance(from) - amount,
      balance_to: this.balance(to) + amount
    }
    this.balances.set(from, t.balance_from)
    this.balances.set(to, t.balance_to)
    this.byKey.set(key, t)
    this.effects++
    return { ok: true, result: t }
  }

  /** Serves the bank's subjects on a NATS connection (queue group: several banks share load). */
  serve(nc: NatsConnection): this {
    const enc = new TextEncoder()
    const reply = (m: { respond: (d: Uint8Array) => boolean }, body: unknown) => m.respond(enc.encode(JSON.stringify(body)))
    this.subs.push(
      nc.subscribe(Subjects.toolInvoke("money_transfer"), {
        queue: "demo-bank",
        callback: (e, m) => {
          if (e !== null) return // a subscription error (for example a permissions violation) carries no message
          void (async () => {
            const req = safeJson(m.data)
            const key = typeof req["idempotency_key"] === "string" ? req["idempotency_key"] : ""
            if (key === "") return reply(m, { ok: false, error: "idempotency_key is required" })
            this.invocations.set(key, (this.invocations.get(key) ?? 0) + 1)
            if (this.opts.onRequest?.(key) === "drop") return
            const fresh = !this.byKey.has(key)
            const out = this.transfer(key, (req["args"] as Record<string, unknown>) ?? {})
            if (fresh && out.ok) {
              if (this.opts.ledger !== undefined) {
                try {
                  await this.opts.ledger.record(key, out.result)
                } catch {
                  // Not recorded: no reply, so the kernel's read-back decides (the key is applied in memory).
                  return
                }
              }
              await this.opts.onApplied?.(out.result, key)
            }
            reply(m, out)
          })()
        }
      }),
      nc.subscribe(Subjects.toolReadback("money_transfer"), {
        queue: "demo-bank",
        callback: (e, m) => {
          if (e !== null) return // a subscription error (for example a permissions violation) carries no message
          const req = safeJson(m.data)
          const t = this.byKey.get(String(req["idempotency_key"] ?? ""))
          reply(m, t === undefined ? { applied: false } : { applied: true, result: t })
        }
      }),
      nc.subscribe(Subjects.toolInvoke("bank_balance"), {
        queue: "demo-bank",
        callback: (e, m) => {
          if (e !== null) return // a subscription error (for example a permissions violation) carries no message
          const args = (safeJson(m.data)["args"] as Record<string, unknown>) ?? {}
          const account = typeof args["account"] === "string" ? args["account"] : ""
          reply(m, account === "" ? { ok: false, error: "bank_balance needs {account: string}" } : { ok: true, result: { account, balance: this.balance(account) } })
        }
      })
    )
    return this
  }

  stop(): void {
    for (const s of this.subs) s.unsubscribe()
    this.subs = []
    this.stopFollowing()
  }
}

const safeJson = (data: Uint8Array): Record<string, unknown> => {
  try {
    const v: unknown = JSON.parse(new TextDecoder().decode(data))
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}
