import { Command, Options } from "@effect/cli"
import { Console, Effect, Layer, Option } from "effect"
import { layerNats } from "../ledger/Nats.js"
import { provision } from "../ledger/Provision.js"
import { retentionOf } from "../ledger/Retention.js"
import { natsOptionsFor } from "./Connect.js"

/**
 * `wk provision`: creates the streams and buckets and applies the configured retention limits
 * (`WK_EVENTS_MAX_BYTES` and the other retention variables, `WK_REPLICAS`) as the `provisioner`
 * NATS user. The running kernel's user may create what is missing but not reconfigure the
 * evidence streams, so a change of limits is applied here.
 */
export const provisionCommand = Command.make(
  "provision",
  {
    user: Options.text("user").pipe(Options.optional, Options.withDescription("NATS user (default: the URL's, else provisioner)")),
    pass: Options.text("pass").pipe(Options.optional, Options.withDescription("NATS password (default: the URL's, else provisioner-dev)"))
  },
  (o) =>
    Effect.gen(function* () {
      const fromUrl = natsOptionsFor("provisioner")
      const nats = { ...fromUrl, user: Option.getOrElse(o.user, () => fromUrl.user ?? "provisioner"), pass: Option.getOrElse(o.pass, () => fromUrl.pass ?? "provisioner-dev"), name: "wk-provision" }
      const result = yield* provision(Number(process.env["WK_REPLICAS"] ?? 1), retentionOf()).pipe(
        Effect.provide(Layer.mapError(layerNats(nats), (e) => new Error(`connect as ${nats.user}: ${e.message}`))),
        Effect.mapError((e) => new Error(e.message))
      )
      if (result.unchanged.length > 0) return yield* Effect.fail(new Error(`user ${nats.user} may not reconfigure ${result.unchanged.join("; ")}`))
      yield* Console.log("provisioned: streams, buckets and retention limits are as configured")
    })
).pipe(Command.withDescription("Create the streams and buckets and apply the retention limits, as the provisioner NATS user"))
