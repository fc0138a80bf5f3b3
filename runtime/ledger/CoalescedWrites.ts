import type { NatsConnection } from "@nats-io/transport-node"

/**
 * One socket write per event-loop turn, after the first.
 *
 * nats.js (`ProtocolHandler.sendCommand`, nats-core 3.x) queues what a connection publishes and
 * writes it from a microtask: one write per batch of commands issued before that microtask runs.
 * A kernel under load resumes many requests from one socket read, each over several microtask
 * rounds (fiber resumptions, promise chains), so left to nats.js each round's appends and replies
 * take a write of their own: many writes per socket read (docs/performance.md has the counts).
 *
 * Here the first batch of each turn is still written from a microtask, so a lone call waits for
 * nothing more. Batches queued after it in the same turn are written once, as the turn ends
 * (`setImmediate`). nats.js's own rule stays: a buffer past its pending limit is written at once.
 *
 * This replaces a method of nats.js's protocol handler, which is not public API. Returns false and
 * changes nothing when the handler does not have the shape this was written against; the spec in
 * test/ledger/CoalescedWrites.test.ts holds the installed nats.js to that shape.
 */
export const coalesceWrites = (nc: NatsConnection): boolean => {
  const protocol = (nc as unknown as { readonly protocol?: unknown }).protocol
  if (!isProtocolHandler(protocol)) return false
  const encoder = new TextEncoder()
  let wroteThisTurn = false
  const endTurn = () => void (wroteThisTurn = false)
  const flush = () => protocol.flushPending()
  protocol.sendCommand = (cmd: string | Uint8Array, ...payloads: Array<Uint8Array>) => {
    const wasEmpty = protocol.outbound.length() === 0
    protocol.outbound.fill(typeof cmd === "string" ? encoder.encode(cmd) : cmd, ...payloads)
    if (!wasEmpty) {
      if (protocol.outbound.size() >= protocol.pendingLimit) flush()
      return
    }
    if (wroteThisTurn) {
      setImmediate(flush)
      return
    }
    wroteThisTurn = true
    setImmediate(endTurn)
    queueMicrotask(flush)
  }
  return true
}

/** The parts of nats.js's protocol handler `coalesceWrites` uses. */
interface ProtocolHandler {
  readonly outbound: {
    length(): number
    size(): number
    fill(data: Uint8Array, ...payloads: Array<Uint8Array>): unknown
  }
  readonly pendingLimit: number
  flushPending(): void
  sendCommand(cmd: string | Uint8Array, ...payloads: Array<Uint8Array>): void
}

const isProtocolHandler = (p: unknown): p is ProtocolHandler => {
  if (typeof p !== "object" || p === null) return false
  const h = p as Record<string, unknown>
  const outbound = h["outbound"] as Record<string, unknown> | undefined
  return (
    typeof h["sendCommand"] === "function" &&
    typeof h["flushPending"] === "function" &&
    typeof h["pendingLimit"] === "number" &&
    typeof outbound === "object" &&
    outbound !== null &&
    typeof outbound["length"] === "function" &&
    typeof outbound["size"] === "function" &&
    typeof outbound["fill"] === "function"
  )
}
