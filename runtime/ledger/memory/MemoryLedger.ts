import { Layer } from "effect"
import { layerMemoryHeldCallStore } from "./MemoryHeldCallStore.js"
import { layerMemoryLeases } from "./MemoryLeases.js"
import { layerMemoryOpenIndex } from "./MemoryOpenIndex.js"
import { layerMemoryOutbox } from "./MemoryOutbox.js"
import { layerMemoryPresenceMarks } from "./MemoryPresenceMarks.js"
import { layerMemoryToolClient } from "./MemoryToolClient.js"
import { layerMemoryWakes } from "./MemoryWakes.js"
import { layerMemoryReevaluationProgressStore } from "./MemoryReevaluationProgressStore.js"
import { layerMemoryStandingGrants } from "./MemoryStandingGrants.js"
import { layerMemoryReadNonces } from "./MemoryReadNonces.js"
import { layerMemoryContinuations } from "../ContinuationStore.js"
import { layerMemoryPasskeyCounters } from "./MemoryPasskeyCounters.js"

/**
 * Every ledger port (ledger/LedgerPorts.ts) in memory, for tests of the loops with `it.effect`
 * and `TestClock`, plus what tests read and control: `MemoryWakeQueue`, `MemoryOutbox`,
 * `MemoryTools`, `MemoryPresence`. One process's worth: nothing is shared between two builds.
 */
export const layerMemoryLedger = Layer.mergeAll(
  layerMemoryHeldCallStore,
  layerMemoryWakes,
  layerMemoryLeases,
  layerMemoryOpenIndex,
  layerMemoryPresenceMarks,
  layerMemoryOutbox,
  layerMemoryToolClient,
  layerMemoryReevaluationProgressStore,
  layerMemoryStandingGrants,
  layerMemoryReadNonces,
  layerMemoryContinuations,
  layerMemoryPasskeyCounters
)
