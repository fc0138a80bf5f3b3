// A `--import` hook for a kernel process under measurement: records when each socket write and
// read happens (performance.now(), and what the write carries), and writes the record to
// WK_TIMELINE_FILE as the process exits. Read by bench/critical-path.ts. Costs a few
// microseconds per socket operation; never loaded outside the bench.
import net from "node:net"
import { writeFileSync } from "node:fs"

const file = process.env.WK_TIMELINE_FILE
const Keep = 200_000
/** [ms, "W" | "R", text]: a write's commands (first 2 KiB, latin1), a read's first 64 bytes. */
const log = []
const text = (chunk, n) => (typeof chunk === "string" ? chunk.slice(0, n) : Buffer.from(chunk.buffer, chunk.byteOffset, Math.min(n, chunk.byteLength)).toString("latin1"))

if (file !== undefined) {
  const write = net.Socket.prototype.write
  net.Socket.prototype.write = function (chunk, ...rest) {
    if (log.length < Keep) log.push([performance.now(), "W", text(chunk, 2048)])
    return write.call(this, chunk, ...rest)
  }
  const emit = net.Socket.prototype.emit
  net.Socket.prototype.emit = function (event, data, ...rest) {
    if (event === "data" && log.length < Keep) log.push([performance.now(), "R", text(data, 64)])
    return emit.call(this, event, data, ...rest)
  }
  process.on("exit", () => writeFileSync(file, JSON.stringify(log)))
}
