import { Command, Options } from "@effect/cli"
import { serveKernelHttp } from "../observability/KernelHttp.js"
import { layerNatsKernelProbe } from "../ledger/NatsKernelProbe.js"
import { log, LogLevels, setKernelIdentity, setLogLevel, type LogLevel } from "../observability/Log.js"
import { Console, Effect, Either, Option } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { generateKernelKey, readKernelKey } from "../ledger/KernelKey.js"
import { connect } from "@nats-io/transport-node"
import { layerKernel, publishLocalPlugins, runKernel } from "../Kernel.js"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { loadProfileFiles } from "../policy/ProfileFiles.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { kvDemoBankLedger } from "../executor/DemoBankLedger.js"
import { DemoBank } from "../executor/DemoBank.js"
import type { Profile } from "../schema/Profile.js"
import { MissingNatsServer, findNatsServer, portInUse, startNatsServer } from "./EmbeddedNats.js"
import { devCredentialsIn } from "./DevCredentials.js"
import { lockStore } from "./StoreLock.js"
import { globalSelection } from "./ContextSelection.js"
import { defaultDataDir, defaultProfiles, repoRoot } from "./Paths.js"
import { composeServerConfig, serverStoreDir } from "./LocalNatsUsers.js"

const profilesOption = Options.text("profiles").pipe(Options.withDefault(defaultProfiles), Options.withDescription("profile file or directory of *.json profiles"))
const noBank = Options.boolean("no-bank").pipe(Options.withDescription("do not start the demo bank tool service"))
const devOption = Options.boolean("dev").pipe(
  Options.withDescription("development mode: trust the dev principal keys, the committed dev plugin signer and the *-dev NATS passwords (npm start uses it); without it the kernel refuses them")
)

const kernelCredentials = { user: process.env["WK_NATS_USER"] ?? "kernel", pass: process.env["WK_NATS_PASS"] ?? "kernel-dev" }
/** The demo bank's own tool service user (nats.conf `tool-demo-bank`). */
const bankCredentials = { user: process.env["WK_TOOL_USER"] ?? "tool-demo-bank", pass: process.env["WK_TOOL_PASS"] ?? "demo-bank-dev" }

/**
 * Development credentials are loud: without `--dev`, a kernel that would trust a derivable dev
 * key or the committed dev plugin signer, or connect with a `*-dev` password, refuses to start;
 * with it, its first line of output says it runs in development mode and what that trusts.
 */
const checkDevCredentials = (profiles: ReadonlyArray<Profile>, nats: ReadonlyArray<{ user: string; pass: string | undefined }>, dev: boolean) =>
  Effect.gen(function* () {
    const found = devCredentialsIn(profiles, nats)
    const list = found.map((f) => `  - ${f}`).join("\n")
    if (dev) return yield* Console.log(`DEVELOPMENT MODE (--dev): this kernel trusts development credentials anyone can use; never expose it.${found.length > 0 ? `\n${list}` : ""}`)
    if (found.length > 0) {
      return yield* Effect.fail(new Error(`refusing to start: development credentials anyone can use would be trusted (pass --dev for development, as npm start does; docs/operations.md "Production credentials"):\n${list}`))
    }
  })

/** Copy-paste commands for another terminal; a server other than the default is named in them. */
const tryLines = (servers: string | ReadonlyArray<string>): Array<string> => {
  const server = typeof servers === "string" ? servers : servers.join(",")
  const flag = server === "127.0.0.1:4322" ? "" : ` --server nats://${server}`
  return [
    `  try:   npm run -s wk -- propose money_transfer '{"from":"alice","to":"bob","amount":250}'${flag}`,
    ...(flag === "" ? [] : [`  or once: npm run -s wk -- context add local${flag} --use   (then every wk command talks to this server)`])
  ]
}

/** The port `wk start` serves metrics and health on unless told otherwise (Prometheus exporters' convention). */
const DefaultMetricsPort = 9464

const logLevelOption = Options.choice("log-level", LogLevels).pipe(
  Options.optional,
  Options.withDescription("structured log level on stderr (or WK_LOG_LEVEL; default info; debug: a line per committed event)")
)
const verboseOption = Options.boolean("verbose").pipe(Options.withAlias("v"), Options.withDescription("the same as --log-level debug"))

/** `--log-level` / `-v` for the rest of the process. */
const applyLogLevel = (level: Option.Option<LogLevel>, verbose: boolean) =>
  Effect.sync(() => {
    if (verbose) setLogLevel("debug")
    else if (Option.isSome(level)) setLogLevel(level.value)
  })

const metricsPortOption = Options.integer("metrics-port").pipe(
  Options.optional,
  Options.withDescription("serve /metrics, /healthz and /readyz on this port (or WK_METRICS_PORT; 0: off; wk start defaults to 9464)")
)

const metricsHostOption = Options.text("metrics-host").pipe(
  Options.optional,
  Options.withDescription("address the metrics and health port listens on (or WK_METRICS_HOST; default 127.0.0.1; 0.0.0.0 for a scraper or probe from another host or container)")
)

/** Where the operator endpoints listen. */
interface OpsAddress {
  readonly port: number
  readonly host: string
}

/** `--metrics-host`, else WK_METRICS_HOST, else loopback. */
const metricsHostOf = (flag: Option.Option<string>): string => {
  const env = process.env["WK_METRICS_HOST"]
  return Option.isSome(flag) ? flag.value : env !== undefined && env !== "" ? env : "127.0.0.1"
}

/** `--metrics-port`, else WK_METRICS_PORT, else the command's default; 0 turns it off. */
const metricsPortOf = (flag: Option.Option<number>, fallback: number | undefined): number | undefined => {
  const env = process.env["WK_METRICS_PORT"]
  const port = Option.isSome(flag) ? flag.value : env !== undefined && env !== "" ? Number(env) : fallback
  return port === undefined || port === 0 || !Number.isFinite(port) ? undefined : port
}

/** Runs a kernel (and optionally the demo bank) against a NATS URL until interrupted. */
const serve = (url: string, profiles: ReadonlyArray<Profile>, withBank: boolean, ops: OpsAddress | undefined) =>
  Effect.gen(function* () {
    const nats = natsOptionsFromUrl(url, kernelCredentials)
    useDefaultAnchor()
    // The kernel's scope closes inside the layers': on Ctrl-C it stops taking requests and answers
    // the ones it took while its connection and stores are still open, then the layers close.
    yield* Effect.scoped(
      Effect.gen(function* () {
        // Every kernel process loads plugins by digest from the object store; publish ours there.
        yield* publishLocalPlugins(join(repoRoot, "plugins"))
        const { owner } = yield* runKernel
        setKernelIdentity(owner)
        log.info({ nats: nats.servers }, "kernel ready")
        const policy = yield* (yield* PolicyStore).current
        const metrics = ops === undefined ? undefined : yield* serveKernelHttp(ops.port, ops.host).pipe(Effect.provide(layerNatsKernelProbe))
        if (withBank) {
          const bankConn = yield* Effect.acquireRelease(
            Effect.promise(() => connect({ servers: nats.servers, ...bankCredentials, name: "wk-demo-bank" })),
            (nc) => Effect.promise(() => nc.drain())
          )
          // The bank's books live in KV (wk_demo_bank), written as the kernel user: the bank's own
          // user may only serve its tools' subjects.
          const booksConn = yield* Effect.acquireRelease(
            Effect.promise(() => connect({ servers: nats.servers, ...(nats.user !== undefined ? { user: nats.user } : {}), ...(nats.pass !== undefined ? { pass: nats.pass } : {}), name: "wk-demo-bank-books" })),
            (nc) => Effect.promise(() => nc.drain())
          )
          const bank = yield* Effect.promise(async () => new DemoBank({ ledger: await kvDemoBankLedger(booksConn) }).restore())
          bank.serve(bankConn)
        }
        yield* Console.log(
          [
            `Witness Kernel ready (${owner}), policy epoch ${policy.epoch}, ${policy.principals.size} principals, ${policy.profiles.reduce((n, p) => n + (p.plugins?.length ?? 0), 0)} plugins pinned${withBank ? `, demo bank (${bankCredentials.user}) serving money_transfer and bank_balance` : ""}`,
            `  NATS:  ${nats.servers}  (users agent, witness, tool-demo-bank, auditor: their passwords are in nats.conf)`,
            ...(metrics !== undefined && ops !== undefined ? [`  Ops:   http://${ops.host}:${metrics}/metrics, /healthz, /readyz  (--metrics-port, --metrics-host)`] : []),
            ...tryLines(nats.servers),
            `  Ctrl-C drains and stops.`
          ].join("\n")
        )
        return yield* Effect.never
      })
    ).pipe(Effect.provide(layerKernel({ nats, profiles, replicas: Number(process.env["WK_REPLICAS"] ?? 1) })))
  })

/**
 * `wk start --dev` signs its commits like a production kernel: with `WK_KERNEL_KEY` when set,
 * else with a development key kept beside the embedded server's data (`<data dir>/kernel.key`,
 * made on first start). Its public key is printed for a trust root's `kernel_keys`.
 */
const useDevKernelKey = Effect.gen(function* () {
  if (process.env["WK_KERNEL_KEY"] !== undefined && process.env["WK_KERNEL_KEY"] !== "") return
  const path = join(defaultDataDir, "kernel.key")
  if (!existsSync(path)) {
    mkdirSync(defaultDataDir, { recursive: true })
    generateKernelKey(path)
  }
  const key = readKernelKey(path)
  if (Either.isLeft(key)) return yield* Effect.fail(new Error(key.left.message))
  process.env["WK_KERNEL_KEY"] = path
  yield* Console.log(`commits signed with the development kernel key ${path} (public key ${key.right.publicKey}: a trust root's kernel_keys)`)
})

/** Checkpoints are anchored outside NATS by default: `<data dir>/anchor/checkpoints.jsonl` unless WK_ANCHOR_FILE names a file. */
const useDefaultAnchor = (): void => {
  if (process.env["WK_ANCHOR_FILE"] !== undefined && process.env["WK_ANCHOR_FILE"] !== "") return
  process.env["WK_ANCHOR_FILE"] = join(defaultDataDir, "anchor", "checkpoints.jsonl")
}

/** `--dev`: archiving runs as nats.conf's development `retention` login unless WK_RETENTION_USER names one. */
const useDevRetentionLogin = (): void => {
  if (process.env["WK_RETENTION_USER"] !== undefined && process.env["WK_RETENTION_USER"] !== "") return
  process.env["WK_RETENTION_USER"] = "retention"
  process.env["WK_RETENTION_PASS"] = "retention-dev"
}

/** The credentials a kernel started this way connects with: its own, and the demo bank's. */
const credentialsOf = (url: string | undefined, withBank: boolean) => {
  const own = url === undefined || url === "" ? kernelCredentials : natsOptionsFromUrl(url, kernelCredentials)
  return [{ user: own.user ?? "", pass: own.pass }, ...(withBank ? [bankCredentials] : [])]
}

/** `wk start`: the embedded default. Starts nats-server from nats.conf unless NATS_URL is set. */
export const startCommand = Command.make(
  "start",
  { profiles: profilesOption, noBank, dev: devOption, port: Options.integer("port").pipe(Options.optional, Options.withDescription("NATS port for the embedded server (default 4322, or WK_NATS_PORT)")), metricsPort: metricsPortOption, metricsHost: metricsHostOption, logLevel: logLevelOption, verbose: verboseOption },
  ({ profiles: profilesPath, noBank, dev, port, metricsPort, metricsHost, logLevel, verbose }) =>
    Effect.gen(function* () {
      yield* applyLogLevel(logLevel, verbose)
      const url = globalSelection.server ?? process.env["NATS_URL"]
      const profiles = yield* loadProfileFiles(profilesPath)
      yield* checkDevCredentials(profiles, credentialsOf(url, !noBank), dev)
      if (dev) yield* useDevKernelKey
      if (dev) useDevRetentionLogin()
      const opsPort = metricsPortOf(metricsPort, DefaultMetricsPort)
      const ops = opsPort === undefined ? undefined : { port: opsPort, host: metricsHostOf(metricsHost) }
      if (url !== undefined && url !== "") return yield* serve(url, profiles, !noBank, ops)
      if (findNatsServer() === null) return yield* Effect.fail(new Error(MissingNatsServer))
      const p = Option.getOrElse(port, () => Number(process.env["WK_NATS_PORT"] ?? 4322))
      yield* Effect.scoped(
        Effect.gen(function* () {
          // One process owns a store: a second nats-server on the same folder would lose what the
          // first one committed. The lock is taken before the port is looked at, so a second start
          // on this store is told about the first, whatever port it asks for.
          const lock = yield* Effect.acquireRelease(
            Effect.try({ try: () => lockStore(defaultDataDir), catch: (e) => e as Error }),
            (l) => Effect.sync(() => l.release())
          )
          if (yield* Effect.promise(() => portInUse(p))) {
            return yield* Effect.fail(
              new Error(`port ${p} is in use by another program (not a wk start on ${defaultDataDir}): stop it, or run this store's server on another port (--port or WK_NATS_PORT), or set NATS_URL to use that server`)
            )
          }
          const server = yield* Effect.acquireRelease(
            // nats.conf plus the users commands added for this store (wk mcp init): LocalNatsUsers.ts.
            Effect.tryPromise({ try: () => startNatsServer({ config: composeServerConfig(defaultDataDir), storeDir: serverStoreDir(defaultDataDir), storeDirInConfig: true, port: p }), catch: (e) => e as Error }),
            (s) => Effect.promise(() => s.stop())
          )
          lock.serving(server.pid, server.url)
          yield* Console.log(`nats-server ${server.url} (pid ${server.pid}, store ${join(defaultDataDir, "nats")})`)
          yield* serve(server.url, profiles, !noBank, ops)
        })
      )
    })
).pipe(Command.withDescription("Run NATS (embedded unless NATS_URL is set), the kernel and the demo bank"))

/** `wk kernel`: one kernel process against NATS_URL (run several for scale). */
export const kernelCommand = Command.make(
  "kernel",
  { profiles: profilesOption, dev: devOption, withBank: Options.boolean("with-bank").pipe(Options.withDescription("also serve the demo bank")), metricsPort: metricsPortOption, metricsHost: metricsHostOption, logLevel: logLevelOption, verbose: verboseOption },
  ({ profiles: profilesPath, dev, withBank, metricsPort, metricsHost, logLevel, verbose }) =>
    Effect.gen(function* () {
      yield* applyLogLevel(logLevel, verbose)
      const url = globalSelection.server ?? process.env["NATS_URL"]
      if (url === undefined || url === "") return yield* Effect.fail(new Error("wk kernel needs NATS_URL (for example nats://kernel:kernel-dev@127.0.0.1:4322); use `wk start` for the embedded default"))
      const profiles = yield* loadProfileFiles(profilesPath)
      yield* checkDevCredentials(profiles, credentialsOf(url, withBank), dev)
      const opsPort = metricsPortOf(metricsPort, undefined)
      yield* serve(url, profiles, withBank, opsPort === undefined ? undefined : { port: opsPort, host: metricsHostOf(metricsHost) })
    })
).pipe(Command.withDescription("Run one kernel process against the NATS server in NATS_URL"))
