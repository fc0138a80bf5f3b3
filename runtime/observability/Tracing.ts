import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context as TraceContext, type Link, type Span, type Tracer } from "@opentelemetry/api"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Exit, FiberRef } from "effect"
import { KernelVersion } from "./KernelVersion.js"

export { contextOfHeaders, contextOfTraceparent, headersOfContext, traceparentOf } from "./TraceContext.js"

export { SpanKind }

/**
 * Traces, one per call: the agent's `traceparent` (a NATS header, or the gateway's HTTP header)
 * is the parent of the kernel's `wk.propose` span; plugins, commits, the tool request (which
 * carries the trace on to the tool service) and the delivery are its children. A witness's
 * attestation is a `wk.attest` span in the witness's trace, linked to the call's; the release it
 * enables runs in the call's trace, linked back to the attestation.
 *
 * Off unless configured: with no tracer every helper here returns its effect as it is, so the
 * hot path pays one boolean test.
 */
let tracer: Tracer | undefined
let provider: BasicTracerProvider | undefined

/** Whether spans are recorded in this process. */
export const tracingEnabled = (): boolean => tracer !== undefined

/**
 * Records spans to `exporter` (tests: the SDK's in-memory exporter, flushed per span), or, with
 * no exporter, over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (batched). Returns whether tracing is on.
 */
export const startTracing = (service: string, exporter?: SpanExporter): boolean => {
  const otlp = process.env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? process.env["OTEL_EXPORTER_OTLP_ENDPOINT"]
  if (exporter === undefined && (otlp === undefined || otlp === "")) return false
  const processor = exporter !== undefined ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(new OTLPTraceExporter())
  provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": process.env["OTEL_SERVICE_NAME"] ?? service, "service.version": KernelVersion }),
    spanProcessors: [processor]
  })
  tracer = provider.getTracer("witness-kernel", KernelVersion)
  return true
}

/** Flushes and stops the exporter (at shutdown). */
export const stopTracing = async (): Promise<void> => {
  const p = provider
  provider = undefined
  tracer = undefined
  if (p !== undefined) await p.shutdown().catch(() => undefined)
}

/** The trace context of the work this fiber does (its forks inherit it). */
export const CurrentTrace: FiberRef.FiberRef<TraceContext> = FiberRef.unsafeMake<TraceContext>(ROOT_CONTEXT)

// The context of each call's `wk.propose` span, so later work on the call (a release after an
// attestation, a recovery) joins the call's trace. Bounded like the store's cache.
const callTraces = new Map<string, TraceContext>()
const CallTraceCap = 2_000

/** Remembers `ctx` as the trace of held call `heldId`. */
export const rememberCallTrace = (heldId: string, ctx: TraceContext): void => {
  if (tracer === undefined || trace.getSpanContext(ctx) === undefined) return
  callTraces.delete(heldId)
  callTraces.set(heldId, ctx)
  if (callTraces.size > CallTraceCap) callTraces.delete(callTraces.keys().next().value!)
}

/** The trace of held call `heldId`, if this process saw it proposed. */
export const callTrace = (heldId: string): TraceContext | undefined => callTraces.get(heldId)

export interface SpanOptions {
  readonly kind?: SpanKind
  readonly attributes?: Attributes
  /** The parent (default: the fiber's `CurrentTrace`). */
  readonly parent?: TraceContext
  readonly links?: ReadonlyArray<Link>
  /** Attributes read from the value once the effect succeeds. */
  readonly onSuccess?: (span: Span, value: never) => void
}

/**
 * Runs `effect` inside a span named `name`: the span is `CurrentTrace` for the effect (and
 * every fiber it forks), ends with the effect, and marks a failure or defect as an error.
 * Without tracing it is `effect` itself.
 */
export const withSpan = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>, options: SpanOptions = {}): Effect.Effect<A, E, R> => {
  const t = tracer
  if (t === undefined) return effect
  return Effect.flatMap(options.parent === undefined ? FiberRef.get(CurrentTrace) : Effect.succeed(options.parent), (parent) => {
    const span = t.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, ...(options.attributes !== undefined ? { attributes: options.attributes } : {}), ...(options.links !== undefined ? { links: [...options.links] } : {}) }, parent)
    return Effect.locally(effect, CurrentTrace, trace.setSpan(parent, span)).pipe(
      Effect.onExit((exit) =>
        Effect.sync(() => {
          if (Exit.isSuccess(exit)) (options.onSuccess as ((s: Span, v: A) => void) | undefined)?.(span, exit.value)
          else span.setStatus({ code: SpanStatusCode.ERROR, message: String(exit.cause).slice(0, 300) })
          span.end()
        })
      )
    )
  })
}

/** A span around a promise-returning call outside Effect (the tool request): `run` gets the span's context. */
export const spanAround = async <A>(name: string, parent: TraceContext, attributes: Attributes, kind: SpanKind, run: (ctx: TraceContext) => Promise<A>): Promise<A> => {
  const t = tracer
  if (t === undefined) return run(parent)
  const span = t.startSpan(name, { kind, attributes }, parent)
  try {
    return await run(trace.setSpan(parent, span))
  } catch (e) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) })
    throw e
  } finally {
    span.end()
  }
}

/** A link to the span `ctx` holds, for `SpanOptions.links`. */
export const linkTo = (ctx: TraceContext | undefined, attributes?: Attributes): ReadonlyArray<Link> => {
  const sc = ctx === undefined ? undefined : trace.getSpanContext(ctx)
  return sc === undefined ? [] : [{ context: sc, ...(attributes !== undefined ? { attributes } : {}) }]
}

/**
 * Starts a span under the fiber's `CurrentTrace` for work that ends elsewhere (a plugin call
 * handed to a worker and awaited later); the caller ends it. Undefined without tracing.
 */
export const startChildSpan = (name: string, attributes: Attributes): Effect.Effect<Span | undefined> => {
  const t = tracer
  if (t === undefined) return Effect.succeed(undefined)
  return Effect.map(FiberRef.get(CurrentTrace), (parent) => t.startSpan(name, { attributes }, parent))
}
