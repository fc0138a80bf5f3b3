import { Command, Options } from "@effect/cli"
import { Console, Effect, Either } from "effect"
import { log } from "../observability/Log.js"
import { loadVerifierConfig } from "../verifiers/VerifierConfig.js"
import { gitAncestry } from "../verifiers/GitAncestry.js"
import { sqlReadback } from "../verifiers/SqlReadback.js"
import { VerifierRunner, type Check } from "../verifiers/VerifierRunner.js"
import { CliError, connectClient } from "./Connect.js"
import { ExitCode } from "./Exit.js"

/** `wk verifier --config FILE`: a verifier route for the evidence kinds its config enables, until stopped. */
export const verifierCommand = Command.make(
  "verifier",
  { config: Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the verifier's config (JSON: principal, class, git.repos, sql.connections; docs/verifiers.md)")) },
  ({ config }) =>
    Effect.gen(function* () {
      const cfg = yield* Either.match(loadVerifierConfig(config), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: Effect.succeed })
      const checks: Record<string, Check> = {}
      if (cfg.git !== undefined) checks["git-ancestry"] = gitAncestry(cfg.git.repos, cfg.timeout_ms)
      if (cfg.sql !== undefined) checks["sql-readback"] = sqlReadback(cfg.sql.connections, cfg.timeout_ms)
      if (Object.keys(checks).length === 0) return yield* Effect.fail(new CliError({ message: `${config}: enables no evidence kind (give git.repos or sql.connections)`, exit: ExitCode.usage }))
      // The `route` NATS role: it reads and attests like a witness and keeps a durable consumer on WK_WITNESS.
      const client = yield* connectClient("route", cfg.principal, cfg.key_file)
      const runner = new VerifierRunner({
        client,
        class: cfg.class,
        checks,
        timeoutMs: cfg.timeout_ms,
        onResult: (heldId, v) => log.info({ loop: "verifier", held_id: heldId, term: v.term, status: v.status, ...(v.status === "failed" ? { err: v.reason } : { disposition: v.disposition }) }, "evidence term checked")
      })
      yield* Effect.tryPromise({ try: () => runner.start(), catch: (e) => new CliError({ message: `cannot start the verifier: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.unreachable }) })
      yield* Console.log(`Verifier ${cfg.principal} (class ${cfg.class}) serving ${Object.keys(checks).join(", ")}; waiting for witness requests (Ctrl-C stops)`)
      yield* Effect.addFinalizer(() => Effect.promise(() => runner.stop()))
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Run a verifier: check the evidence terms of held calls (git ancestry, SQL read-back) and attest what was read"))
