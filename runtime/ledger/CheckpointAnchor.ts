import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs"
import { dirname } from "node:path"

/**
 * A checkpoint anchor: an append-only file of JSON lines, one per checkpoint this kernel stored,
 * `{"seq":<its WK_EVENTS sequence>,"checkpoint":<its stored bytes, as they are (JSON)>}`, kept
 * outside `WK_EVENTS` (`WK_ANCHOR_FILE`). The kernel's NATS login cannot reach it, so removing
 * checkpoints from the stream, with what they covered, leaves this copy standing; an auditor
 * pulls it (`wk audit anchor pull`) into a copy of its own and replays with `--anchor`.
 *
 * The trust it gives: nothing in NATS can rewrite it; whoever can write the file on its host
 * can. Keep it where the kernel's OS account may only append (`chattr +a`, a WORM or
 * object-lock volume, a log shipper that forwards each line), and pull often: a pull refuses a
 * file whose earlier lines changed, so what an auditor pulled stays evidence.
 */
export interface AnchoredCheckpoint {
  /** The checkpoint's sequence in `WK_EVENTS`. */
  readonly seq: number
  /** The checkpoint's stored bytes. */
  readonly data: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** One anchor line (with its newline). The stored checkpoint is one line of JSON already. */
export const anchorLine = (c: AnchoredCheckpoint): string => `{"seq":${c.seq},"checkpoint":${decoder.decode(c.data)}}\n`

/** Appends checkpoints to the anchor file (O_APPEND: each line lands whole after what is there). */
export const appendToAnchor = (path: string, checkpoints: ReadonlyArray<AnchoredCheckpoint>): void => {
  if (checkpoints.length === 0) return
  if (!existsSync(dirname(path))) mkdirSync(dirname(path), { recursive: true })
  appendFileSync(path, checkpoints.map(anchorLine).join(""), { flag: "a", mode: 0o640 })
}

/**
 * The lines of an anchor file's text, each checkpoint's bytes exactly as anchored. Throws naming
 * the first line that is not `{"seq":N,"checkpoint":{...}}`; a last line without its newline (a
 * write in progress) is left out.
 */
export const parseAnchor = (text: string): Array<AnchoredCheckpoint & { readonly line: string }> => {
  const out: Array<AnchoredCheckpoint & { readonly line: string }> = []
  const lines = text.split("\n")
  lines.pop() // after the last newline: empty, or a line still being written
  lines.forEach((line, i) => {
    const m = /^\{"seq":(\d+),"checkpoint":(\{.*\})\}$/.exec(line)
    if (m === null) throw new Error(`anchor line ${i + 1} is not {"seq":N,"checkpoint":{...}}`)
    out.push({ seq: Number(m[1]), data: encoder.encode(m[2]!), line: `${line}\n` })
  })
  return out
}

/** An anchor file's checkpoints (an absent file holds none). */
export const readAnchor = (path: string): Array<AnchoredCheckpoint & { readonly line: string }> =>
  existsSync(path) ? parseAnchor(readFileSync(path, "utf8")) : []

/** Where the kernel anchors its checkpoints (`WK_ANCHOR_FILE`), when set. */
export const anchorFileFromEnv = (): string | undefined => {
  const path = process.env["WK_ANCHOR_FILE"]
  return path === undefined || path === "" ? undefined : path
}
