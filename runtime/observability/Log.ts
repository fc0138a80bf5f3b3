import { randomBytes } from "node:crypto"
import { trace, type SpanContext } from "@opentelemetry/api"
import { Fiber, Option } from "effect"
import pino from "pino"
import { callTrace, CurrentTrace } from "./Tracing.js"

/** Levels an operator may choose (`--log-level`, `WK_LOG_LEVEL`). */
export const LogLevels = ["error", "warn", "info", "debug"] as const
export type LogLevel = (typeof LogLevels)[number]

const levelOf = (raw: string | undefined): LogLevel => (LogLevels as ReadonlyArray<string>).includes(raw ?? "") ? (raw as LogLevel) : "info"

/**
 * The span a log line belongs to: the span of the fiber that logs (its `CurrentTrace`), else the
 * trace of the held call the line names (its `wk.propose`), when spans are recorded.
 */
const spanOfLine = (fields: { readonly held_id?: unknown }): SpanContext | undefined => {
  const fiber = Fiber.getCurrentFiber()
  const own = Option.isSome(fiber) ? trace.getSpanContext(fiber.value.getFiberRef(CurrentTrace)) : undefined
  if (own !== undefined) return own
  const call = typeof fields.held_id === "string" ? callTrace(fields.held_id) : undefined
  return call === undefined ? undefined : trace.getSpanContext(call)
}

/**
 * The kernel's structured log: JSON lines on stderr (stdout is the CLI's), each with its level
 * by name (`info`, `debug`, ...), the process's `run` id and, once a kernel runs, its `kernel`
 * id; loops add `loop`, calls add `held_id` and `event`; a line written inside a traced span, or
 * naming a call whose trace this process holds, carries `trace_id` and `span_id`. Quiet by
 * default (`info`: start, stop, warnings, failures); `debug` adds a line per committed event.
 */
export const log = pino(
  {
    level: levelOf(process.env["WK_LOG_LEVEL"]),
    base: { run: randomBytes(4).toString("hex") },
    timestamp: pino.stdTimeFunctions.isoTime,
    messageKey: "msg",
    formatters: { level: (label) => ({ level: label }) },
    mixin: (fields: { readonly held_id?: unknown }) => {
      const span = spanOfLine(fields)
      return span === undefined ? {} : { trace_id: span.traceId, span_id: span.spanId }
    }
  },
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
