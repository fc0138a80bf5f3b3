import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { createInterface } from "node:readline/promises"
import type { Delivery } from "../client/Client.js"
import type { JsonValue } from "../schema/Json.js"
import { ask, CliError, connectClient } from "./Connect.js"
import { ExitCode, exitOfReply } from "./Exit.js"
import { json, keyOpt, principalOpt } from "./SignerOptions.js"
import { readHeld, stateOf } from "./HeldCommands.js"
import { presentationDigest } from "../schema/Canonical.js"

const heldIdArg = Args.text({ name: "held_id" }).pipe(Args.withDescription("the held call, as `wk propose` or `wk held ls` prints it"))

/** Asks on a terminal; without one (a pipe, CI) the answer is no unless --yes was given. */
const confirm = (question: string) =>
  Effect.promise(async () => {
    if (!process.stdin.isTTY) return false
    const rl = createInterface({ input: process.stdin, output: process.stdout })
    try {
      return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim())
    } finally {
      rl.close()
    }
  })

const attestCommand = Command.make(
  "attest",
  {
    heldId: heldIdArg,
    principal: principalOpt,
    klass: Options.text("class").pipe(Options.withDescription("the witness class you attest as (human, ci, fraud, ...)")),
    key: keyOpt,
    reject: Options.boolean("reject").pipe(Options.withDescription("reject instead of approve")),
    reason: Options.text("reason").pipe(Options.optional, Options.withDescription("why, in your words (signed; the agent sees it, at most 500 characters)")),
    yes: Options.boolean("yes").pipe(Options.withAlias("y"), Options.withDescription("sign without asking")),
    json
  },
  ({ heldId, principal, klass, key, reject, reason, yes, json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("witness", principal, Option.getOrUndefined(key))
      const h = yield* readHeld(client, heldId)
      const request = h["witness_request"] as { presentation?: unknown; contract?: unknown; contract_digest?: string } | null
      if (request === null || request === undefined || h["lifecycle"] !== "open") return yield* new CliError({ message: `held call ${heldId} is ${String(h["lifecycle"])} and waits for no witness` })
      const decision = reject ? "reject" : "approve"
      // The digest of exactly what is printed below: the kernel refuses it if the call is shown differently by then.
      const presentation_digest = presentationDigest(request.presentation ?? {})
      const why = Option.getOrUndefined(reason)
      yield* Console.log(
        [
          `You are about to ${decision.toUpperCase()} as ${principal} (${klass}):`,
          `presentation     ${JSON.stringify(request.presentation, null, 2).replace(/\n/g, "\n                 ")}`,
          `witness rule     ${JSON.stringify(request.contract)}`,
          `held_id          ${heldId}`,
          `generation       ${String(h["generation"])}`,
          `call_digest      ${String(h["call_digest"])}`,
          `contract_digest  ${String(h["contract_digest"])}`,
          `presentation     sha256 ${presentation_digest}`,
          ...(why !== undefined ? [`reason           ${why}`] : [])
        ].join("\n")
      )
      if (!yes && !(yield* confirm("Sign this attestation?"))) return yield* new CliError({ message: "not signed (answer y on a terminal, or pass --yes)" })
      const reply = yield* ask(`attest ${heldId}`, () =>
        client.attest({
          held_id: heldId,
          class: klass,
          decision,
          generation: Number(h["generation"]),
          call_digest: String(h["call_digest"]),
          contract_digest: String(h["contract_digest"]),
          presentation_digest,
          ...(why !== undefined ? { reason: why } : {})
        })
      )
      yield* Console.log(json ? JSON.stringify(reply, null, 2) : `${reply.status} ${JSON.stringify(reply)}`)
      if (reply.status >= 400) process.exitCode = exitOfReply(reply)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Show a held call's presentation and digests, confirm, sign an attestation bound to them, and send it"))

const cancelCommand = Command.make(
  "cancel",
  { heldId: heldIdArg, principal: principalOpt, key: keyOpt, reason: Options.text("reason").pipe(Options.withDefault("cancelled from the wk CLI"), Options.withDescription("why, recorded in the call's events")), json },
  ({ heldId, principal, key, reason, json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("agent", principal, Option.getOrUndefined(key))
      const reply = yield* ask(`cancel ${heldId}`, () => client.cancel(heldId, reason))
      if (reply.status === 404) return yield* new CliError({ message: `no held call ${heldId} (list open ones with \`wk held ls\`)`, exit: ExitCode.refused })
      yield* Console.log(json ? JSON.stringify(reply, null, 2) : reply.status === 200 ? `cancelled ${heldId}` : `${reply.status} ${reply.error?.message ?? JSON.stringify(reply)}`)
      if (reply.status >= 400) process.exitCode = exitOfReply(reply)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Cancel a held call (its proposer or a policy admin); refused once the effect may have started"))

/**
 * `wk settle`: a signed statement that an unknown outcome did or did not happen, by a read-back
 * witness the contract or the tool's rule names, or by a policy admin (wk.v1.held.settle).
 */
const settleCommand = Command.make(
  "settle",
  {
    heldId: heldIdArg,
    principal: principalOpt,
    key: keyOpt,
    happened: Options.boolean("happened").pipe(Options.withDescription("the effect happened (read back from the system of record)")),
    noEffect: Options.boolean("no-effect").pipe(Options.withDescription("the effect did not happen")),
    result: Options.text("result").pipe(Options.optional, Options.withDescription("what was read back, as JSON (with --happened)")),
    reason: Options.text("reason").pipe(Options.optional, Options.withDescription("why, signed and delivered with the outcome (at most 500 characters)")),
    json
  },
  (o) =>
    Effect.gen(function* () {
      if (o.happened === o.noEffect) return yield* new CliError({ message: "say what happened: exactly one of --happened or --no-effect", exit: ExitCode.usage })
      const resultText = Option.getOrUndefined(o.result)
      const result =
        resultText === undefined
          ? undefined
          : yield* Effect.try({ try: () => JSON.parse(resultText) as JsonValue, catch: () => new CliError({ message: `--result is not JSON: ${resultText.slice(0, 200)}`, exit: ExitCode.usage }) })
      const client = yield* connectClient("witness", o.principal, Option.getOrUndefined(o.key))
      const reply = yield* ask(`settle ${o.heldId}`, () =>
        client.settle(o.heldId, o.happened ? "effect_happened" : "no_effect", { ...(result !== undefined ? { result } : {}), ...(Option.isSome(o.reason) ? { reason: o.reason.value } : {}) })
      )
      yield* Console.log(o.json ? JSON.stringify(reply, null, 2) : reply.status < 300 ? `settled ${o.heldId}: ${o.happened ? "effect happened" : "no effect"} (${reply.authority ?? "accepted"})` : `${reply.status} ${reply.reason ?? reply.error?.message ?? JSON.stringify(reply)}`)
      if (reply.status >= 300) process.exitCode = exitOfReply(reply)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Settle a call whose outcome is unknown: the effect happened (--happened) or not (--no-effect); signed"))

const asOpt = Options.text("as").pipe(Options.withDefault("agent:alice"), Options.withDescription("the proposing principal (it signs the acknowledgement)"))

/** The tool ran and reported a failure: `tool_failed` (or, from an older kernel, `completed` with `ok: false`). */
const toolFailed = (d: Delivery) => d.outcome === "tool_failed" || (d.outcome === "completed" && d.ok === false)

/** The exit code of a delivered result: completed (0), tool failed (8), denied (4), cancelled or expired (5). */
export const exitOfDelivery = (d: Delivery): number => {
  if (toolFailed(d)) return ExitCode.toolFailed
  if (d.outcome === "completed") return ExitCode.ok
  return d.outcome === "denied" ? ExitCode.denied : ExitCode.refused
}

/** One line for a delivered result: outcome, held_id, result. */
export const describeDelivery = (d: Delivery) =>
  `${toolFailed(d) ? "tool_failed" : d.outcome}${d.admission === "quarantined" ? " (result quarantined)" : ""} ${d.held_id}: ${JSON.stringify(d.result)}${toolFailed(d) ? "  (the tool ran and reported a failure)" : ""}`

const resultCommand = Command.make(
  "result",
  {
    heldId: heldIdArg,
    wait: Options.boolean("wait").pipe(Options.withDescription("wait until the call ends and its result is delivered")),
    timeout: Options.integer("timeout-ms").pipe(Options.withDefault(60_000), Options.withDescription("with --wait, give up after this long (exit 3: still held)")),
    as: asOpt,
    key: keyOpt,
    ack: Options.boolean("ack").pipe(Options.withDescription("also acknowledge the delivery (as `wk ack` does; --wait does by default)")),
    noAck: Options.boolean("no-ack").pipe(Options.withDescription("with --wait, leave the delivery unacknowledged (the kernel keeps republishing it)")),
    json
  },
  ({ heldId, wait, timeout, as, key, ack, noAck, json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("agent", as, Option.getOrUndefined(key))
      const h = yield* readHeld(client, heldId)
      if ((h["outcome"] === null || h["outcome"] === undefined) && !wait)
        return yield* new CliError({ message: `${heldId} has no result yet: it is ${stateOf(h)} (wait for it with \`wk result ${heldId} --wait\`)`, exit: ExitCode.held })
      const d = yield* Effect.tryPromise({
        try: () => client.result(heldId, { sessionId: String(h["session_id"]), timeoutMs: wait ? timeout : 5_000, ack: (ack || wait) && !noAck }),
        catch: (e) => new CliError({ message: `${heldId} has no delivered result after ${wait ? timeout : 5_000} ms (${e instanceof Error ? e.message : String(e)}): see \`wk held show ${heldId}\``, exit: ExitCode.held })
      })
      yield* Console.log(json ? JSON.stringify(d, null, 2) : describeDelivery(d))
      process.exitCode = exitOfDelivery(d)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Print a held call's delivered result; the exit code is its outcome (docs/cli.md)"))

const ackCommand = Command.make(
  "ack",
  {
    heldId: heldIdArg,
    deliveryId: Options.text("delivery-id").pipe(Options.optional, Options.withDescription("the delivery to acknowledge (default: the call's delivery, read from its session)")),
    as: asOpt,
    key: keyOpt,
    json
  },
  ({ heldId, deliveryId, as, key, json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("agent", as, Option.getOrUndefined(key))
      const id = Option.isSome(deliveryId)
        ? deliveryId.value
        : (yield* Effect.tryPromise({
            try: () => client.result(heldId, { timeoutMs: 5_000, ack: false }),
            catch: (e) => new CliError({ message: `${heldId} has no delivery to acknowledge (${e instanceof Error ? e.message : String(e)}): see \`wk held show ${heldId}\``, exit: ExitCode.held })
          })).delivery_id
      const reply = yield* ask(`ack ${heldId}`, () => client.ack(heldId, id))
      yield* Console.log(json ? JSON.stringify(reply, null, 2) : reply.status === 200 ? `acknowledged ${heldId} (delivery ${id})` : `${reply.status} ${reply.error?.message ?? JSON.stringify(reply)}`)
      process.exitCode = exitOfReply(reply)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Acknowledge a held call's delivered result, so the kernel stops re-delivering it"))

export { ackCommand, attestCommand, cancelCommand, resultCommand, settleCommand }
