import { Command, Options } from "@effect/cli"
import { Console, Effect, Option, Queue } from "effect"
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerConfig } from "@nats-io/jetstream"
import { eventView } from "../heldcall/Views.js"
import { decodeCommitBytes, type Commit } from "../schema/Commit.js"
import type { HeldEvent } from "../schema/Events.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { ask, connectClient } from "./Connect.js"

/**
 * One event as `wk events tail` prints it: its address (the stream sequence of its commit and its
 * index in the commit) and what it says (admin view).
 */
interface Tailed {
  readonly seq: number
  readonly index: number
  readonly held_id: string
  readonly tool: string | null
  readonly event: Record<string, unknown>
}

const json = Options.boolean("json").pipe(Options.withDescription("print one JSON object per event instead of text"))
const held = Options.text("held").pipe(Options.optional, Options.withDescription("only this held call's events"))
const tool = Options.text("tool").pipe(Options.optional, Options.withDescription("only events of calls of this tool"))
const types = Options.text("type").pipe(Options.repeated, Options.withDescription("only events of this type (repeatable), e.g. call.held"))
const all = Options.boolean("all").pipe(Options.withDescription("start at the oldest event in the stream instead of the next new one"))
const since = Options.integer("since-seq").pipe(Options.optional, Options.withDescription("start at this stream sequence"))
const timeout = Options.integer("timeout-ms").pipe(Options.withDefault(0), Options.withDescription("stop after this long (0: until Ctrl-C)"))
const limit = Options.integer("limit").pipe(Options.withDefault(0), Options.withDescription("stop after printing this many events (0: no limit)"))

/** The held id of an event subject `wk.v1.events.<held_id>` (none for the policy and archive records). */
const heldIdOf = (subject: string): string | undefined => {
  const id = subject.slice(Subjects.events("").length)
  return id.startsWith("_") ? undefined : id
}

/**
 * `wk events tail`: every call's events live, from an ordered consumer on the events stream (no
 * server state beyond this reader), one line per event at its address `<seq>.<index>` (the
 * commit's stream sequence, the event's index in it). Filters by held call, tool and event type;
 * the tool of a call that began before the tail is read from its first event.
 */
export const eventsCommand = Command.make("events").pipe(
  Command.withDescription("Follow the event log live: every call's events (tail)"),
  Command.withSubcommands([
    Command.make("tail", { json, held, tool, types, all, since, timeout, limit }, (o) =>
      Effect.gen(function* () {
        const client = yield* connectClient("kernel", "admin:cli")
        const js = jetstream(client.nc)
        const jsm = yield* ask("open the event stream", () => jetstreamManager(client.nc))
        const toolOf = new Map<string, string | null>()
        const lookupTool = (heldId: string, e: HeldEvent) =>
          Effect.gen(function* () {
            if (e.type === "call.proposed") toolOf.set(heldId, e.tool)
            const known = toolOf.get(heldId)
            if (known !== undefined) return known
            const first = yield* ask(`read the first event of ${heldId}`, () => jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq: 1 }))
            const firstEvent = first === null ? null : decodeCommitBytes(first.data).events[0]
            const t = firstEvent !== null && firstEvent.type === "call.proposed" ? firstEvent.tool : null
            toolOf.set(heldId, t)
            return t
          })
        const start: Partial<ConsumerConfig> = Option.isSome(o.since)
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: o.since.value }
          : { deliver_policy: o.all ? DeliverPolicy.All : DeliverPolicy.New }
        const filter = Option.isSome(o.held) ? Subjects.events(o.held.value) : Subjects.events(">")
        const consumer = yield* ask("follow the event stream", () => js.consumers.get(Streams.events, { filter_subjects: filter, ...start }))
        const messages = yield* ask("follow the event stream", () => consumer.consume())
        yield* Effect.addFinalizer(() => Effect.promise(() => messages.close().then(() => undefined, () => undefined)))
        // Progress on stderr, so `--json` output stays one event per line.
        const from = Option.isSome(o.since) ? `from seq ${o.since.value}` : o.all ? "from the oldest event" : "new events"
        yield* Effect.sync(() => process.stderr.write(`following ${filter} on ${Streams.events} (${from}); Ctrl-C stops\n`))
        const queue = yield* Queue.unbounded<{ seq: number; subject: string; data: Uint8Array }>()
        void (async () => {
          for await (const m of messages) void Queue.unsafeOffer(queue, { seq: m.seq, subject: m.subject, data: m.data })
        })()
        const deadline = o.timeout > 0 ? Date.now() + o.timeout : Number.POSITIVE_INFINITY
        let printed = 0
        while (Date.now() < deadline && (o.limit === 0 || printed < o.limit)) {
          const next = yield* Queue.take(queue).pipe(Effect.timeout(Math.max(1, Math.min(1_000, deadline - Date.now()))), Effect.option)
          if (Option.isNone(next)) continue
          const heldId = heldIdOf(next.value.subject)
          if (heldId === undefined) continue
          let commit: Commit
          try {
            commit = decodeCommitBytes(next.value.data)
          } catch {
            continue // not a commit this CLI can decode
          }
          for (let index = 0; index < commit.events.length && (o.limit === 0 || printed < o.limit); index++) {
            const event = commit.events[index]!
            if (o.types.length > 0 && !o.types.includes(event.type)) continue
            const t = yield* lookupTool(heldId, event)
            if (Option.isSome(o.tool) && t !== o.tool.value) continue
            const line: Tailed = { seq: next.value.seq, index, held_id: heldId, tool: t, event: eventView("admin", event) }
            yield* Console.log(o.json ? JSON.stringify(line) : `${`${line.seq}.${index}`.padStart(10)}  ${event.at}  ${heldId}  ${(t ?? "-").padEnd(16)}  ${event.type}`)
            printed++
          }
        }
      }).pipe(Effect.scoped)
    ).pipe(Command.withDescription("Print events as they are recorded: --held, --tool and --type filter; --all or --since-seq replay first"))
  ])
)
