import { Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schema } from "effect"
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { Buckets, Consumers, Streams, Subjects } from "../schema/Subjects.js"
import { ReevaluationKeyPrefix, ReevaluationProgress, summarize, type ReevaluationSummary } from "../schema/ReevaluationProgress.js"
import { ask, connectClient } from "./Connect.js"
import { deliveryStateOf, getHeld, openHeldIds, stateOf } from "./HeldCommands.js"

type Pin = { name: string; version: string; sha256: string; signer: string; stages: ReadonlyArray<string> }

/**
 * `wk status`: streams and their consumers (with lag), open held calls by state, the policy epoch
 * and the plugin set in force, and every kernel process that answers `wk.v1.admin.status`.
 */
export const statusCommand = Command.make(
  "status",
  { json: Options.boolean("json").pipe(Options.withDescription("print JSON instead of text")) },
  ({ json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("kernel", "admin:cli")
      const nc = client.nc
      const streams = yield* ask("read streams", async () => {
        const jsm = await jetstreamManager(nc)
        const out = []
        for await (const s of jsm.streams.list()) {
          const consumers = []
          let ephemeral = 0
          for await (const c of jsm.consumers.list(s.config.name)) {
            // Ordered consumers (KV watches, readers) are short-lived: count them, list the durable ones.
            if (c.config.durable_name === undefined && c.name.startsWith("oc_")) ephemeral++
            else consumers.push({ name: c.name, pending: c.num_pending, ack_pending: c.num_ack_pending, redelivered: c.num_redelivered })
          }
          out.push({ name: s.config.name, messages: s.state.messages, bytes: s.state.bytes, consumers, ephemeral_consumers: ephemeral })
        }
        return out.filter((s) => s.name.startsWith("WK_") || s.name.startsWith("KV_wk_") || s.name.startsWith("OBJ_wk_"))
      })
      const policy = yield* ask("read the policy", async () => {
        const kv = await new Kvm(nc).open(Buckets.policy)
        const e = await kv.get("active")
        if (e === null || e.operation !== "PUT") return null
        return e.json<{ epoch: number; profiles: ReadonlyArray<{ name: string; layer?: string; plugins?: ReadonlyArray<Pin> }> }>()
      })
      const reevaluation = policy === null ? null : yield* ask("read re-evaluation progress", () => reevaluationOf(nc, policy.epoch))
      const ids = yield* openHeldIds(client, 2_000)
      const states = new Map<string, number>()
      const facts = yield* Effect.forEach(ids, (id) => getHeld(client, id).pipe(Effect.option), { concurrency: 16 })
      // Only a call whose lifecycle is open counts as open; an ended call the index still names
      // (its removal is level-based, on the call's next drive) is reported apart, by its delivery.
      let open = 0
      const ended = new Map<string, number>()
      for (const f of facts) {
        if (Option.isNone(f)) continue
        if (f.value["lifecycle"] === "open") {
          open++
          states.set(stateOf(f.value), (states.get(stateOf(f.value)) ?? 0) + 1)
        } else {
          const d = deliveryStateOf(f.value)
          ended.set(d, (ended.get(d) ?? 0) + 1)
        }
      }
      const kernels = yield* ask("ask kernels", async () => {
        const out: Array<Record<string, unknown>> = []
        for await (const m of await nc.requestMany(Subjects.adminStatus, new Uint8Array(0), { maxWait: 500 })) out.push(m.json<Record<string, unknown>>())
        return out
      })
      const plugins = (policy?.profiles ?? []).flatMap((p) => (p.plugins ?? []).map((pin) => ({ profile: p.name, name: pin.name, version: pin.version, sha256: pin.sha256, signer: pin.signer, stages: pin.stages })))
      const controller = streams.find((st) => st.name === Streams.wakes)?.consumers.find((c) => c.name === Consumers.controller)
      const report = {
        server: nc.getServer(),
        controller_lag: controller === undefined ? null : controller.pending + controller.ack_pending,
        kernels: kernels.map((k) => ({ owner: k["owner"], pid: k["pid"], version: k["version"] ?? null, uptime_ms: k["uptime_ms"], policy_epoch: k["policy_epoch"], last_recovery_at: k["last_recovery_at"] ?? null, reevaluating: k["reevaluating"] ?? null })),
        policy_epoch: policy?.epoch ?? null,
        reevaluation,
        profiles: (policy?.profiles ?? []).map((p) => ({ name: p.name, layer: p.layer ?? null })),
        plugins,
        open_held_calls: { total: open, by_state: Object.fromEntries([...states].sort()) },
        ended_held_calls_indexed: { total: [...ended.values()].reduce((a, b) => a + b, 0), by_delivery: Object.fromEntries([...ended].sort()) },
        streams
      }
      if (json) return yield* Console.log(JSON.stringify(report, null, 2))
      const lines = [
        `server        ${report.server}`,
        `kernels       ${report.kernels.length === 0 ? "none answered (start one with `npm start` or `wk kernel`)" : report.kernels.map((k) => `${String(k.owner)} (pid ${String(k.pid)}, v${String(k.version)}, epoch ${String(k.policy_epoch)}, last recovery ${k.last_recovery_at === null ? "not yet" : String(k.last_recovery_at)})`).join(", ")}`,
        `health        ${report.kernels.length} kernel${report.kernels.length === 1 ? "" : "s"} seen (${[...new Set(report.kernels.map((k) => `v${String(k.version)}`))].join(", ") || "none"}), controller lag ${report.controller_lag === null ? "unknown (no controller consumer)" : `${report.controller_lag} wake${report.controller_lag === 1 ? "" : "s"} waiting or in progress`}`,
        `policy epoch  ${String(report.policy_epoch)}  profiles ${report.profiles.map((p) => `${p.name}${p.layer ? `(${p.layer})` : ""}`).join(", ")}`,
        `re-evaluation ${reevaluationLine(reevaluation)}`,
        `open calls    ${open}${states.size > 0 ? "  " + [...states].map(([s, n]) => `${s}: ${n}`).join(", ") : ""}`,
        ...(ended.size > 0 ? [`ended calls   ${[...ended].map(([s, n]) => `${s}: ${n}`).join(", ")}  (still in the open index)`] : []),
        "plugins",
        ...(plugins.length === 0 ? ["  none pinned (built-in rules)"] : plugins.map((p) => `  ${p.name}@${p.version}  ${p.stages.join(",")}  sha256 ${p.sha256.slice(0, 16)}…  (${p.profile})`)),
        "streams",
        ...streams.flatMap((s) => [`  ${s.name.padEnd(18)} ${String(s.messages).padStart(8)} msgs${s.ephemeral_consumers > 0 ? `  (${s.ephemeral_consumers} ephemeral readers)` : ""}`, ...s.consumers.map((c) => `    consumer ${c.name}: pending ${c.pending}, ack pending ${c.ack_pending}`)])
      ]
      yield* Console.log(lines.join("\n"))
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Streams, consumers and their lag, open held calls by state, policy epoch, plugins in force, kernels answering"))

const decodeProgress = Schema.decodeUnknownOption(Schema.parseJson(ReevaluationProgress))

/** The re-evaluation of open calls under `epoch`, summed over the shard records kernels keep in `wk_policy`. */
export const reevaluationOf = async (nc: Parameters<typeof jetstreamManager>[0], epoch: number): Promise<ReevaluationSummary | null> => {
  const kv = await new Kvm(nc).open(Buckets.policy)
  const records: Array<ReevaluationProgress> = []
  for await (const k of await kv.keys(`${ReevaluationKeyPrefix}${epoch}.>`)) {
    const e = await kv.get(k)
    if (e === null || e.operation !== "PUT") continue
    const r = decodeProgress(e.string())
    if (r._tag === "Some") records.push(r.value)
  }
  if (records.length === 0) return null
  return summarize(epoch, records[0]!.shards, records)
}

const reevaluationLine = (r: ReevaluationSummary | null): string =>
  r === null
    ? "not started for this epoch"
    : r.finished
      ? `epoch ${r.epoch}: done, ${r.done} open calls re-evaluated`
      : `epoch ${r.epoch}: ${r.done}/${r.total} calls (${r.total === 0 ? 0 : Math.floor((r.done / r.total) * 100)}%), ${r.rate_per_s} calls/s, ${r.shards_finished}/${r.shards} shards done${r.owners.length > 0 ? ` (${r.owners.join(", ")})` : ""}`
