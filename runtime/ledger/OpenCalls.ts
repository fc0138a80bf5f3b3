import type { KV } from "@nats-io/kv"
import { Buckets } from "../schema/Subjects.js"

/** At most this many open calls are read for one count (a scrape must stay cheap). */
export const OpenCallsCountLimit = 10_000

/** A call's state as `wk status` names it: `open/<readiness>`, then `/<execution>` once it runs. */
const stateOf = (facts: { readonly lifecycle?: unknown; readonly readiness?: unknown; readonly execution?: unknown }): string | undefined =>
  facts.lifecycle !== "open" ? undefined : `open/${String(facts.readiness)}${facts.execution !== undefined && facts.execution !== "none" ? `/${String(facts.execution)}` : ""}`

/**
 * Open held calls by state: the ids of the open-call index (`wk_open`), each call's projected
 * facts (`wk_facts`) read 16 at a time. Ended calls the index still names (a delivery owed) are
 * not open and not counted.
 */
export const openCallsByState = async (kv: (bucket: string) => Promise<KV>): Promise<ReadonlyMap<string, number>> => {
  const [open, facts] = await Promise.all([kv(Buckets.open), kv(Buckets.facts)])
  const ids: Array<string> = []
  for await (const k of await open.keys()) if (ids.length < OpenCallsCountLimit) ids.push(k)
  const counts = new Map<string, number>()
  for (let i = 0; i < ids.length; i += 16) {
    const entries = await Promise.all(ids.slice(i, i + 16).map((id) => facts.get(id)))
    for (const e of entries) {
      if (e === null || e.operation !== "PUT" || e.length === 0) continue
      const state = stateOf(e.json<Record<string, unknown>>())
      if (state !== undefined) counts.set(state, (counts.get(state) ?? 0) + 1)
    }
  }
  return counts
}
