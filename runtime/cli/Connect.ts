import { Effect, Schema } from "effect"
import { readFileSync } from "node:fs"
import { WitnessClient } from "../client/Client.js"
import { devKeyPair } from "../client/DevKeys.js"
import { natsOptionsFromUrl, type NatsOptions } from "../ledger/Nats.js"
import { KeyFile } from "../plugins/Signing.js"
import { CliError } from "./CliError.js"
import { activeContext } from "./Context.js"
import { globalSelection } from "./ContextSelection.js"
import { ExitCode } from "./Exit.js"

export { CliError }

/**
 * The NATS URL the CLI talks to: `--server`, else NATS_URL, else the context's server, else the
 * embedded server of `npm start` (127.0.0.1, port WK_NATS_PORT or 4322).
 */
export const serverUrl = (): string =>
  globalSelection.server ?? (process.env["NATS_URL"] || undefined) ?? activeContext()?.server ?? `nats://127.0.0.1:${process.env["WK_NATS_PORT"] ?? 4322}`

/** The role user (nats.conf) a command connects as, unless the URL, WK_NATS_USER or the context names one. */
export type Role = "kernel" | "provisioner" | "agent" | "witness" | "auditor" | "gateway" | "tool" | "route"

/**
 * Connection options as `role`: the URL's user and password, else WK_NATS_USER/WK_NATS_PASS,
 * else the context's, else the role's development credentials from nats.conf.
 */
export const natsOptionsFor = (role: Role, url: string = serverUrl()): NatsOptions => {
  const ctx = activeContext()
  const user = process.env["WK_NATS_USER"] ?? ctx?.user ?? role
  const pass = process.env["WK_NATS_PASS"] ?? ctx?.password ?? (user === role ? `${role}-dev` : undefined)
  return natsOptionsFromUrl(url, { user, ...(pass !== undefined ? { pass } : {}) })
}

const describe = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** A failed NATS connect as one line that says what to do, with the exit code of its cause. */
export const connectFailure = (e: unknown, opts: NatsOptions): CliError => {
  const where = Array.isArray(opts.servers) ? opts.servers.join(",") : String(opts.servers)
  if (e instanceof Error && e.name === "AuthorizationError")
    return new CliError({
      message: `NATS at ${where} refused user '${opts.user ?? "(none)"}' and its password: check the user and password in the URL, WK_NATS_USER/WK_NATS_PASS or the context (\`wk context ls\`)`,
      exit: ExitCode.unauthenticated
    })
  return new CliError({
    message: `cannot reach NATS at ${where} (${describe(e)}): start the kernel with \`npm start\`, or point wk at a server with --server URL or \`wk context use NAME\``,
    exit: ExitCode.unreachable
  })
}

/** A failed request as one line: nobody answering is "unreachable"; a permission refusal says which user. */
export const requestFailure = (what: string, e: unknown): CliError => {
  const message = describe(e)
  if (/no responders|timeout|TIMEOUT|closed/i.test(message))
    return new CliError({ message: `${what}: no kernel answered (${message}): start one with \`npm start\`, or \`wk kernel\` against this server`, exit: ExitCode.unreachable })
  if (/stream not found|bucket not found/i.test(message))
    return new CliError({ message: `${what}: no kernel has set up this server yet (${message}): start one with \`npm start\`, or \`wk kernel\` against it`, exit: ExitCode.unreachable })
  if (/Permissions Violation|Authorization/i.test(message))
    return new CliError({ message: `${what}: NATS refused it for this user (${message}): connect as a user whose role allows it (WK_NATS_USER, or the context's user)`, exit: ExitCode.unauthenticated })
  return new CliError({ message: `${what}: ${message}`, exit: ExitCode.failed })
}

/** The secret key to sign with: `--key`, else the context's key, else the principal's dev key. */
export const secretKeyOf = (principal: string, keyFile: string | undefined): Effect.Effect<Uint8Array, CliError> => {
  const file = keyFile ?? activeContext()?.key
  return file === undefined
    ? Effect.succeed(devKeyPair(principal).secretKey)
    : Effect.try({
        try: () => {
          const k = Schema.decodeUnknownSync(KeyFile)(JSON.parse(readFileSync(file, "utf8")))
          return new Uint8Array(Buffer.from(k.secret_key, "base64"))
        },
        catch: () => new CliError({ message: `cannot read key file ${file}: expected the JSON that \`wk keygen --out ${file}\` or \`wk dev-key PRINCIPAL --out ${file}\` writes` })
      })
}

/**
 * A protocol client as `principal` (signing with `keyFile`, the context's key, or the
 * principal's dev key), over a connection as `role`; closed when the scope ends.
 */
export const connectClient = (role: Role, principal: string, keyFile?: string) =>
  Effect.gen(function* () {
    const opts = yield* Effect.try({ try: () => natsOptionsFor(role), catch: (e) => new CliError({ message: describe(e), exit: ExitCode.usage }) })
    const secretKey = yield* secretKeyOf(principal, keyFile)
    return yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => WitnessClient.connect({ ...opts, principal, secretKey, timeoutMs: 5_000 }),
        catch: (e) => connectFailure(e, opts)
      }),
      (c) => Effect.promise(() => c.close())
    )
  })

/** A request that fails with one line when the kernel does not answer. */
export const ask = <A>(what: string, f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (e) => requestFailure(what, e) })
