import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { createInterface } from "node:readline/promises"
import { ask, CliError, connectClient } from "./Connect.js"
import { getHeld } from "./HeldCommands.js"
import { presentationDigest } from "../schema/Canonical.js"

const heldIdArg = Args.text({ name: "held_id" })
const principalOpt = Options.text("principal").pipe(Options.withDescription("the principal you sign as (registered in the profile)"))
const keyOpt = Options.file("key", { exists: "yes" }).pipe(Options.optional, Options.withDescription("key file from `wk keygen` (default: the principal's dev key, development only)"))
const json = Options.boolean("json").pipe(Options.withDescription("print the reply as JSON"))

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
      const h = yield* getHeld(client, heldId)
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
      if (reply.status >= 400) process.exitCode = 1
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Show a held call's presentation and digests, confirm, sign an attestation bound to them, and send it"))

const cancelCommand = Command.make(
  "cancel",
  { heldId: heldIdArg, principal: principalOpt, key: keyOpt, reason: Options.text("reason").pipe(Options.withDefault("cancelled from the wk CLI")), json },
  ({ heldId, principal, key, reason, json }) =>
    Effect.gen(function* () {
      const client = yield* connectClient("agent", principal, Option.getOrUndefined(key))
      const reply = yield* ask(`cancel ${heldId}`, () => client.cancel(heldId, reason))
      if (reply.status === 404) return yield* new CliError({ message: `no held call ${heldId} (list open ones with \`wk held ls\`)` })
      yield* Console.log(json ? JSON.stringify(reply, null, 2) : reply.status === 200 ? `cancelled ${heldId}` : `${reply.status} ${reply.error?.message ?? JSON.stringify(reply)}`)
      if (reply.status >= 400) process.exitCode = 1
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Cancel a held call (its proposer or a policy admin); refused once the effect may have started"))

export { attestCommand, cancelCommand }
