import { Context } from "effect"
import type { RoKV } from "@nats-io/kv"
import type { RawMessage, ReadProgress, Start } from "./StreamRange.js"

/** A stream's configuration and state as a reader needs them. */
export interface StreamState {
  readonly subjects: ReadonlyArray<string>
  readonly firstSeq: number
  readonly lastSeq: number
  readonly messages: number
  readonly deleted: number
}

/** One object store bucket, read only. */
export interface ObjectBucket {
  /** The object's bytes, or null when the bucket holds no such object. */
  readonly getBlob: (name: string) => Promise<Uint8Array | null>
}

/**
 * The ledger as a reader sees it: streams, KV buckets and object stores it can read and nothing
 * it can write (no publish, put, purge or delete), as nats.js separates `RoKV` from `KV`. The
 * auditor holds this port and not the connection; `NatsLedgerReader.ts` implements it over a
 * connection of the reader's own login.
 */
export class LedgerReader extends Context.Tag("wk/LedgerReader")<
  LedgerReader,
  {
    /** A stream's subjects and bounds. */
    readonly streamState: (stream: string) => Promise<StreamState>
    /**
     * The stream in order from `start` up to `untilSeq`, each message to `onMessage`, progress at
     * most every `progressEveryMs`; resolves to how many messages were read.
     */
    readonly readOrdered: (stream: string, start: Start, untilSeq: number, onMessage: (m: RawMessage) => void, onProgress?: (p: ReadProgress) => void, progressEveryMs?: number) => Promise<number>
    /** Every message on one subject with `fromSeq <= seq < beforeSeq`, in order. */
    readonly readSubject: (stream: string, subject: string, fromSeq?: number, beforeSeq?: number) => Promise<Array<RawMessage>>
    /** A KV bucket, read only (opened once per reader). */
    readonly kv: (bucket: string) => Promise<RoKV>
    /** An existing object store bucket (never created), read only. */
    readonly objects: (bucket: string) => Promise<ObjectBucket>
  }
>() {}
