import { Effect, Layer } from "effect"
import { Objm } from "@nats-io/obj"
import { LedgerReader } from "./LedgerReader.js"
import { layerNats, Nats, type NatsOptions } from "./Nats.js"
import { readOrderedRange, readSubjectRange } from "./StreamRange.js"

/** The read-only port over a connection held here: only reads are handed on. */
export const layerNatsLedgerReader = Layer.effect(
  LedgerReader,
  Effect.map(Nats, ({ nc, js, jsm, kv }) => ({
    streamState: async (stream: string) => {
      const info = await jsm.streams.info(stream)
      return { subjects: info.config.subjects ?? [], firstSeq: info.state.first_seq, lastSeq: info.state.last_seq, messages: info.state.messages, deleted: info.state.num_deleted ?? 0 }
    },
    readOrdered: (stream, start, untilSeq, onMessage, onProgress, progressEveryMs = 1000) => readOrderedRange(js, stream, start, untilSeq, onMessage, onProgress, progressEveryMs),
    readSubject: (stream, subject, fromSeq, beforeSeq) => readSubjectRange(js, stream, subject, fromSeq, beforeSeq),
    kv,
    objects: async (bucket: string) => {
      const os = await new Objm(nc).open(bucket)
      return { getBlob: (name: string) => os.getBlob(name) }
    }
  }))
)

/** A reader's own connection (`name`, login in `opts`) behind the read-only port; drained when the scope closes. */
export const layerLedgerReaderAt = (opts: NatsOptions) => Layer.provide(layerNatsLedgerReader, layerNats(opts))
export type { NatsOptions } from "./Nats.js"
