import { Effect, Schema } from "effect"
import { readFileSync } from "node:fs"
import { WitnessClient } from "../client/Client.js"
import { devKeyPair } from "../client/DevKeys.js"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { KeyFile } from "../plugins/Signing.js"

/** A CLI failure: one line that says what to do. */
export class CliError extends Schema.TaggedError<CliError>()("CliError", { message: Schema.String }) {}

/** The NATS URL the CLI talks to: `NATS_URL`, else the embedded default of `npm start`. */
export const serverUrl = () => process.env["NATS_URL"] ?? `nats://127.0.0.1:${process.env["WK_NATS_PORT"] ?? 4322}`

/** The role user (nats.conf) a command connects as, unless the URL or WK_NATS_USER names one. */
export type Role = "kernel" | "agent" | "witness" | "auditor"

const secretKeyOf = (principal: string, keyFile: string | undefined): Effect.Effect<Uint8Array, CliError> =>
  keyFile === undefined
    ? Effect.succeed(devKeyPair(principal).secretKey)
    : Effect.try({
        try: () => {
          const k = Schema.decodeUnknownSync(KeyFile)(JSON.parse(readFileSync(keyFile, "utf8")))
          return new Uint8Array(Buffer.from(k.secret_key, "base64"))
        },
        catch: () => new CliError({ message: `cannot read key file ${keyFile}: expected the JSON that \`wk keygen --out ${keyFile}\` writes` })
      })

/**
 * A protocol client as `principal` (signing with `keyFile`, or the principal's dev key), over
 * a connection as `role`; closed when the scope ends.
 */
export const connectClient = (role: Role, principal: string, keyFile?: string) =>
  Effect.gen(function* () {
    const opts = natsOptionsFromUrl(serverUrl(), { user: process.env["WK_NATS_USER"] ?? role, pass: process.env["WK_NATS_PASS"] ?? `${role}-dev` })
    const secretKey = yield* secretKeyOf(principal, keyFile)
    return yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => WitnessClient.connect({ ...opts, principal, secretKey, timeoutMs: 5_000 }),
        catch: (e) => new CliError({ message: `cannot connect to ${opts.servers} (${e instanceof Error ? e.message : String(e)}): start the kernel with \`npm start\` or set NATS_URL` })
      }),
      (c) => Effect.promise(() => c.close())
    )
  })

/** A request that fails with one line when the kernel does not answer. */
export const ask = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({
    try: f,
    catch: (e) => new CliError({ message: `${what}: ${e instanceof Error ? e.message : String(e)} (is a kernel running? \`npm start\`, or \`wk kernel\` with NATS_URL)` })
  })
