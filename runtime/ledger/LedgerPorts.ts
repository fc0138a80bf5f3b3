import { Layer } from "effect"
import { HeldCallStore, layerHeldCallStore } from "./HeldCallStore.js"
import { Leases, layerNatsLeases } from "./Leases.js"
import { OpenIndex, layerNatsOpenIndex } from "./OpenIndex.js"
import { Outbox, layerNatsOutbox } from "./Outbox.js"
import { PresenceMarks, layerNatsPresenceMarks } from "./PresenceMarks.js"
import { ReevaluationProgressStore, layerNatsReevaluationProgressStore } from "./ReevaluationProgressStore.js"
import { ToolClient, layerNatsToolClient } from "./ToolClient.js"
import { StandingGrants, layerNatsStandingGrants } from "./StandingGrants.js"
import { ReadNonces, layerNatsReadNonces } from "./ReadNonces.js"
import { Continuations, layerNatsContinuations } from "./ContinuationStore.js"
import { PasskeyCounters, layerNatsPasskeyCounters } from "./PasskeyCounters.js"
import { WakeQueue, Wakes, layerNatsWakeQueue, layerNatsWakes } from "./Wakes.js"

/**
 * The ports through which the write path (loops/, executor/) reaches the durable ledger and the
 * bus: the held-call store, wakes, leases, the open index, presence marks, the outbox, the
 * tool client, the re-evaluation progress records, the standing approvals, the nonces of signed reads, the kept continuations and passkeys' signature counters. Two implementations provide them all:
 * NATS (`layerNatsLedger`) and memory (ledger/memory/MemoryLedger.ts).
 */
export type LedgerPorts = HeldCallStore | Wakes | WakeQueue | Leases | OpenIndex | PresenceMarks | Outbox | ToolClient | ReevaluationProgressStore | StandingGrants | ReadNonces | Continuations | PasskeyCounters

/** Every port over one NATS connection (streams and buckets provisioned beforehand). */
export const layerNatsLedger = Layer.mergeAll(
  layerHeldCallStore,
  layerNatsWakes,
  layerNatsWakeQueue,
  layerNatsLeases,
  layerNatsOpenIndex,
  layerNatsPresenceMarks,
  layerNatsOutbox,
  layerNatsToolClient,
  layerNatsReevaluationProgressStore,
  layerNatsStandingGrants,
  layerNatsReadNonces,
  layerNatsContinuations,
  layerNatsPasskeyCounters
)
