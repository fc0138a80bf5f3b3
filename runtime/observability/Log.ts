import { randomBytes } from "node:crypto"
import pino from "pino"

/** Levels an operator may choose (`--log-level`, `WK_LOG_LEVEL`). */
export const LogLevels = ["error", "warn", "info", "debug"] as const
export type LogLevel = (typeof LogLevels)[number]

const levelOf = (raw: string | undefined): LogLevel => (LogLevels as ReadonlyArray<string>).includes(raw ?? "") ? (raw as LogLevel) : "info"

/**
 * The kernel's structured log: JSON lines on stderr (stdout is the CLI's), each with the
 * process's `run` id and, once a kernel runs, its `kernel` id; loops add `loop`, calls add
 * `held_id` and `event`. Quiet by default (`info`: start, stop, warnings, failures);
 * `debug` adds a line per committed event.
 */
export const log = pino(
  { level: levelOf(process.env["WK_LOG_LEVEL"]), base: { run: randomBytes(4).toString("hex") }, timestamp: pino.stdTimeFunctions.isoTime, messageKey: "msg" },
  pino.destination({ dest: 2, sync: true })
)

/** Sets the level for the rest of the process (`--log-level`, `-v`). */
export const setLogLevel = (level: LogLevel): void => {
  log.level = level
}

/** Names the kernel in every later line. */
export const setKernelIdentity = (kernel: string): void => log.setBindings({ kernel })

/** A failure value as fields a log line can carry. */
export const errorFields = (e: unknown): { readonly err: string } => ({ err: e instanceof Error ? e.message : typeof e === "string" ? e : String(e) })
