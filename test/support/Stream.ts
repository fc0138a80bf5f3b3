import { jetstreamManager } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { eventsOfMessage } from "../../runtime/schema/Commit.js"

/** Total messages (commits and records) in WK_EVENTS. */
export const eventCount = async (nc: NatsConnection): Promise<number> => {
  const jsm = await jetstreamManager(nc)
  return (await jsm.streams.info(Streams.events)).state.messages
}

/** Every event of one held call, in stream order, with its address (commit sequence, index in the commit). */
export const eventsOf = async (nc: NatsConnection, heldId: string): Promise<Array<HeldEvent & { seq: number; index: number }>> => {
  const jsm = await jetstreamManager(nc)
  const out: Array<HeldEvent & { seq: number; index: number }> = []
  let seq = 1
  for (;;) {
    const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
    if (m === null) return out
    for (const e of eventsOfMessage(m.seq, m.data)) out.push({ ...e.event, seq: e.seq, index: e.index })
    seq = m.seq + 1
  }
}

/** Polls until `check` returns a value or the time runs out. */
export const eventually = async <T>(check: () => Promise<T | undefined | null | false>, timeoutMs = 20_000, every = 50): Promise<T> => {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const v = await check()
      if (v !== undefined && v !== null && v !== false) return v
    } catch (e) {
      last = e
    }
    await new Promise((r) => setTimeout(r, every))
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`)
}
