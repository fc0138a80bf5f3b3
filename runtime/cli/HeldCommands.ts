import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Queue, Schema } from "effect"
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import type { WitnessClient } from "../client/Client.js"
import { reduce } from "../heldcall/Reducer.js"
import { eventView, heldView } from "../heldcall/Views.js"
import { eventsOfMessage } from "../schema/Commit.js"
import type { HeldEvent, SequencedEvent } from "../schema/Events.js"
import { HeldId } from "../schema/Ids.js"
import { Buckets, Streams, Subjects } from "../schema/Subjects.js"
import { ask, CliError, connectClient } from "./Connect.js"
import { ExitCode, exitOfReply } from "./Exit.js"

type Held = Record<string, unknown>

const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of text"))
const heldIdArg = Args.text({ name: "held_id" }).pipe(Args.withDescription("the held call, as `wk propose` or `wk held ls` prints it"))
// Operators read as the kernel's role user by default (it may read every call's events, and sees
// them through the admin view); WK_NATS_USER overrides.
const opsClient = connectClient("kernel", "admin:cli")

/** Events already in the stream for a call, in order (direct get, next by subject). */
const pastEvents = (client: WitnessClient, heldId: string) =>
  ask(`read events of ${heldId}`, async () => {
    const jsm = await jetstreamManager(client.nc)
    const out: Array<SequencedEvent> = []
    let seq = 1
    for (;;) {
      const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
      if (m === null) return out
      out.push(...eventsOfMessage(m.seq, m.data))
      seq = m.seq + 1
    }
  })

/**
 * One call in the admin view (runtime/heldcall/Views.ts: every fact, no quarantined bytes): its
 * events read from the stream as the kernel's role user and folded, or a one-line error naming it.
 */
export const getHeld = (client: WitnessClient, heldId: string) =>
  Effect.gen(function* () {
    if (!Schema.is(HeldId)(heldId)) return yield* new CliError({ message: `held_id '${heldId}' is not a held id (h_ and 32 hex digits, as \`wk held ls\` prints them)`, exit: ExitCode.refused })
    const events = yield* pastEvents(client, heldId)
    const facts = reduce(heldId, events)
    if (facts.spec === null) return yield* new CliError({ message: `no held call ${heldId} (list open ones with \`wk held ls\`)`, exit: ExitCode.refused })
    return heldView("admin", facts) as Held
  })

/** One call as held.get answers this client's principal (its own view of the call), or a one-line error. */
export const readHeld = (client: WitnessClient, heldId: string) =>
  Effect.gen(function* () {
    const r = yield* ask(`held.get ${heldId}`, () => client.get(heldId))
    if (r.status === 404) return yield* new CliError({ message: `no held call ${heldId} (list open ones with \`wk held ls\`)`, exit: ExitCode.refused })
    if (r.status !== 200 || r.held === undefined) return yield* new CliError({ message: `held.get ${heldId}: ${r.error?.message ?? `status ${r.status}`}`, exit: exitOfReply(r) })
    return r.held as Held
  })

/** Ids in the open-calls index (held calls not ended yet), at most `limit`. */
export const openHeldIds = (client: WitnessClient, limit: number) =>
  ask("list open held calls", async () => {
    const kv = await new Kvm(client.nc).open(Buckets.open)
    const ids: Array<string> = []
    for await (const k of await kv.keys()) {
      ids.push(k)
      if (ids.length >= limit) break
    }
    return ids
  })

/** The state a person reads first: lifecycle, or readiness while open. */
export const stateOf = (h: Held): string => (h["lifecycle"] === "open" ? `open/${String(h["readiness"] ?? "?")}${h["execution"] !== "none" ? `/${String(h["execution"])}` : ""}` : String(h["lifecycle"]))

/** Where an ended call's result delivery stands: none owed, pending, delivered (unacknowledged), stopped or acknowledged. */
export const deliveryStateOf = (h: Held): string =>
  h["delivery_stopped_at"] !== undefined && h["continuation_delivery"] === "delivered" ? "delivery stopped" : `delivery ${String(h["continuation_delivery"])}`

const line = (h: Held) => `${String(h["held_id"])}  ${stateOf(h).padEnd(22)} ${String(h["principal"]).padEnd(16)} ${String(h["tool"]).padEnd(18)} expires ${String(h["expires_at"])}`

const lsCommand = Command.make(
  "ls",
  {
    json,
    state: Options.text("state").pipe(Options.optional, Options.withDescription("only calls whose state starts with this (open, open/unsatisfied, open/satisfied, ...)")),
    principal: Options.text("principal").pipe(Options.optional, Options.withDescription("only calls proposed by this principal")),
    tool: Options.text("tool").pipe(Options.optional, Options.withDescription("only calls of this tool")),
    limit: Options.integer("limit").pipe(Options.withDefault(500), Options.withDescription("read at most this many open calls"))
  },
  ({ json, state, principal, tool, limit }) =>
    Effect.gen(function* () {
      const client = yield* opsClient
      const ids = yield* openHeldIds(client, limit)
      const all = yield* Effect.forEach(ids, (id) => getHeld(client, id).pipe(Effect.option), { concurrency: 16 })
      const rows = all
        .flatMap((o) => (Option.isSome(o) ? [o.value] : []))
        // The index may still name a call that just ended: open means the call's own lifecycle is open.
        .filter((h) => h["lifecycle"] === "open")
        .filter((h) => Option.match(state, { onNone: () => true, onSome: (s) => stateOf(h).startsWith(s) }))
        .filter((h) => Option.match(principal, { onNone: () => true, onSome: (p) => h["principal"] === p }))
        .filter((h) => Option.match(tool, { onNone: () => true, onSome: (t) => h["tool"] === t }))
      if (json) return yield* Console.log(JSON.stringify(rows.map((h) => ({ held_id: h["held_id"], state: stateOf(h), principal: h["principal"], tool: h["tool"], call_digest: h["call_digest"], generation: h["generation"], expires_at: h["expires_at"] })), null, 2))
      if (rows.length === 0) return yield* Console.log("no open held calls")
      for (const h of rows) yield* Console.log(line(h))
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("List open held calls (from the wk_open index), filtered by --state, --principal, --tool"))

/** The text view of one call: what it is, what it waits on, what happened. */
export const describeHeld = (h: Held): string => {
  const evidence = (h["evidence"] as Array<Record<string, unknown>> | undefined) ?? []
  return [
    `held call   ${String(h["held_id"])}  (generation ${String(h["generation"])})`,
    `state       ${stateOf(h)}${h["outcome"] ? `  outcome ${String(h["outcome"])}` : ""}`,
    `proposed by ${String(h["principal"])}  session ${String(h["session_id"])} turn ${String(h["turn_id"])} call ${String(h["call_id"])}`,
    `call        ${String(h["tool"])} ${JSON.stringify(h["args"])}`,
    `call_digest ${String(h["call_digest"])}`,
    `verdict     ${String(h["verdict"])}  policy epoch ${String(h["policy_epoch"])}`,
    ...(h["contract_digest"] ? [`contract    ${JSON.stringify((h["witness_contract"] as Record<string, unknown> | null)?.["rule"])}  digest ${String(h["contract_digest"])}`] : []),
    ...((h["reasons"] as Array<{ by: string; reason: string }> | undefined) ?? []).map((r) => `reason      ${r.by}: ${r.reason}`),
    ...evidence.map((e) => `evidence    ${String(e["witness"])} (${String(e["class"])}) ${String(e["decision"])} ${String(e["status"])}${e["reason"] ? `: ${String(e["reason"])}` : ""}`),
    ...((h["revoked_after_release"] as Array<Record<string, unknown>> | undefined) ?? []).map((r) => `REVOKED     ${String(r["witness"])} (${String(r["class"])}) withdrew its approval after release, at ${String(r["issued_at"])}: the effect stands`),
    `execution   ${String(h["execution"])}  attempts ${String(h["dispatch_attempts"])}  result ${String(h["result_admission"])}  ${deliveryStateOf(h)}${h["delivery_stopped_at"] !== undefined ? ` at ${String(h["delivery_stopped_at"])}` : ""}`,
    `expires     ${String(h["expires_at"])}`
  ].join("\n")
}

const showCommand = Command.make("show", { heldId: heldIdArg, json }, ({ heldId, json }) =>
  Effect.gen(function* () {
    const client = yield* opsClient
    const h = yield* getHeld(client, heldId)
    yield* Console.log(json ? JSON.stringify(h, null, 2) : describeHeld(h))
  }).pipe(Effect.scoped)
).pipe(Command.withDescription("Show one held call's facts: state, digests, contract, evidence, execution, delivery"))

const ended = (h: Held) => h["outcome"] !== null && h["outcome"] !== undefined && h["continuation_delivery"] !== "pending"

const watchCommand = Command.make(
  "watch",
  { heldId: heldIdArg, json, timeout: Options.integer("timeout-ms").pipe(Options.withDefault(0), Options.withDescription("stop after this long (0: until the call ends)")) },
  ({ heldId, json, timeout }) =>
    Effect.gen(function* () {
      const client = yield* opsClient
      let h = yield* getHeld(client, heldId)
      const signal = yield* Queue.unbounded<HeldEvent>()
      // Subscribe before reading the past, so nothing falls between the two.
      const sub = client.nc.subscribe(Subjects.events(heldId), {
        callback: (_e, m) => {
          try {
            for (const e of eventsOfMessage(0, m.data)) void Queue.unsafeOffer(signal, e.event)
          } catch {
            // Not an event this CLI can decode: the stream read after the call ends prints what it can.
          }
        }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()))
      const seen = new Set<string>()
      const print = (e: HeldEvent, facts: Held) =>
        Console.log(json ? JSON.stringify({ event: eventView("admin", e), state: stateOf(facts) }) : `${e.at}  ${e.type.padEnd(24)} -> ${stateOf(facts)}`)
      for (const { event } of yield* pastEvents(client, heldId)) {
        seen.add(event.event_id)
        yield* print(event, h)
      }
      const deadline = timeout > 0 ? Date.now() + timeout : Number.POSITIVE_INFINITY
      while (!ended(h) && Date.now() < deadline) {
        const next = yield* Queue.take(signal).pipe(Effect.timeout(Math.min(1_000, deadline - Date.now())), Effect.option)
        if (Option.isSome(next)) {
          if (seen.has(next.value.event_id)) continue
          seen.add(next.value.event_id)
          h = yield* getHeld(client, heldId)
          yield* print(next.value, h)
        } else h = yield* getHeld(client, heldId)
      }
      // The facts can run ahead of the live feed: print what the stream holds that we have not.
      for (const { event } of yield* pastEvents(client, heldId)) if (!seen.has(event.event_id)) yield* print(event, h)
      if (!json) yield* Console.log(`${ended(h) ? "ended" : "still"} ${stateOf(h)}`)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Follow a held call live: print each event and the state it leads to, until the call ends (Ctrl-C stops)"))

export const heldCommand = Command.make("held").pipe(
  Command.withDescription("Read held calls: ls, show, watch"),
  Command.withSubcommands([lsCommand, showCommand, watchCommand])
)
