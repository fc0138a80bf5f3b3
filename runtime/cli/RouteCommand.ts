import { Command, Options } from "@effect/cli"
import { connect } from "@nats-io/transport-node"
import { Console, Effect, Either } from "effect"
import { log } from "../observability/Log.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { loadRouteConfig } from "../routes/RouteConfig.js"
import { RouteRunner } from "../routes/RouteRunner.js"
import { CliError, connectFailure, natsOptionsFor } from "./Connect.js"
import { ExitCode } from "./Exit.js"

/** `wk route --config FILE`: the witness routes (signed webhooks, chat webhooks, email), until stopped. */
export const routeCommand = Command.make(
  "route",
  { config: Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the routes config (JSON: routes by name, gateway_url, retry; docs/routes.md)")) },
  ({ config }) =>
    Effect.gen(function* () {
      const cfg = yield* Either.match(loadRouteConfig(config), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: Effect.succeed })
      const opts = natsOptionsFor("route")
      const nc = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: () => connect({ ...opts, servers: opts.servers, name: "wk-route", ...(opts.user !== undefined ? inboxOptionOf(opts.user) : {}) }), catch: (e) => connectFailure(e, opts) }),
        (c) => Effect.promise(() => c.drain().catch(() => undefined))
      )
      const runner = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => new RouteRunner(nc, cfg, (r) => log.info({ loop: "route", route: r.route, held_id: r.held_id, status: r.status, attempt: r.attempt, ...(r.error !== undefined ? { err: r.error } : {}), ...(r.answer !== undefined ? { answer: r.answer } : {}) }, "witness request routed")).start(),
          catch: (e) => new CliError({ message: `cannot start the routes: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.unreachable })
        }),
        (r) => Effect.promise(() => r.stop())
      )
      void runner
      yield* Console.log(`Witness routes ${Object.keys(cfg.routes).join(", ")} running (Ctrl-C stops)`)
      return yield* Effect.never
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Run witness routes: deliver held calls' witness requests and reminders by signed webhook, chat webhook or email, with retries"))
