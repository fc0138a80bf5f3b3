import { Command, Options } from "@effect/cli"
import { Console, Effect, Either, Layer, Option } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { layerNats, type NatsOptions } from "../ledger/Nats.js"
import { latestCheckpoint, writeCheckpoint } from "../ledger/Checkpoints.js"
import { recordKeyRotation } from "../ledger/KeyRotations.js"
import { checkpointSignatureValid, decodeCheckpoint } from "../schema/Checkpoint.js"
import { natsOptionsFor } from "./Connect.js"
import { exportOver } from "../audit/Export.js"
import { replayOver, type Selection } from "../audit/Replay.js"
import { formatProgress, formatReport } from "../audit/Summary.js"
import { verifyExport } from "../audit/VerifyExport.js"
import { readTrustRoot, type TrustRoot } from "../audit/TrustRoot.js"
import { readAnchor } from "../ledger/CheckpointAnchor.js"
import { pullAnchor } from "../audit/AnchorPull.js"
import { generateKernelKey, readKernelKey, signDocument } from "../ledger/KernelKey.js"

// The server is the global `--server` (or NATS_URL, or the context's): see Connect.serverUrl.
const connection = {
  user: Options.text("user").pipe(Options.optional, Options.withDescription("NATS user (default: the URL's, else the read-only auditor)")),
  pass: Options.text("pass").pipe(Options.optional, Options.withDescription("NATS password (default: the URL's, else auditor-dev)")),
  stream: Options.text("stream").pipe(Options.withDefault("WK_EVENTS"), Options.withDescription("events stream to read (a copy works too)"))
}

/** --user/--pass, else the URL's credentials, else WK_NATS_USER/WK_NATS_PASS or the context's, else the auditor's. */
const natsOf = (o: { user: Option.Option<string>; pass: Option.Option<string> }): NatsOptions => {
  const fromUrl = natsOptionsFor("auditor")
  return { ...fromUrl, user: Option.getOrElse(o.user, () => fromUrl.user ?? "auditor"), pass: Option.getOrElse(o.pass, () => fromUrl.pass ?? "auditor-dev") }
}

/**
 * A replay or export stopped by a signal has no verdict: it says so on stderr and exits with
 * 128 + the signal's number, never 0 (the runtime ends an interrupted program with 0).
 */
const noVerdictOnSignal = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let signal: "SIGTERM" | "SIGINT" | undefined
    const onTerm = () => void (signal = "SIGTERM")
    const onInt = () => void (signal = "SIGINT")
    process.once("SIGTERM", onTerm)
    process.once("SIGINT", onInt)
    return effect.pipe(
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          process.stderr.write(`wk audit ${what}: interrupted${signal !== undefined ? ` by ${signal}` : ""} before it finished: no verdict\n`)
          process.exit(signal === "SIGINT" ? 130 : 143)
        })
      ),
      Effect.ensuring(
        Effect.sync(() => {
          process.removeListener("SIGTERM", onTerm)
          process.removeListener("SIGINT", onInt)
        })
      )
    )
  })

/** `wk audit replay`: re-derives and checks every decision from the log; exit code 1 on any violation. */
const replayCommand = Command.make(
  "replay",
  {
    ...connection,
    fromSeq: Options.integer("from-seq").pipe(Options.optional, Options.withDescription("start at this stream sequence")),
    since: Options.text("since").pipe(Options.optional, Options.withDescription("start at this time (RFC 3339)")),
    held: Options.text("held").pipe(Options.optional, Options.withDescription("audit one held call")),
    json: Options.boolean("json").pipe(Options.withDescription("print the machine report (JSON) instead of the summary")),
    noRerun: Options.boolean("no-rerun").pipe(Options.withDescription("do not re-run recorded plugin decisions from the pinned wasm (they are reported unverified)")),
    noProjection: Options.boolean("no-projection").pipe(Options.withDescription("do not compare with the KV projection")),
    factsBucket: Options.text("facts-bucket").pipe(Options.withDefault("wk_facts"), Options.withDescription("KV bucket of the fact projection to compare with")),
    sessionsStream: Options.text("sessions-stream").pipe(Options.withDefault("WK_SESSIONS"), Options.withDescription("stream of delivered results to check")),
    pluginBucket: Options.text("plugin-bucket").pipe(Options.withDefault("wk_plugins"), Options.withDescription("object store of the pinned plugins to re-run")),
    trust: Options.text("trust").pipe(Options.optional, Options.withDescription("trust root file (admin keys, start-up profile digests, kernel keys) held out of band; without it the first policy record is trusted as found")),
    storeSkew: Options.integer("store-skew").pipe(Options.optional, Options.withDescription("seconds a commit's store time may differ from its events' time (default 300)")),
    checkpoint: Options.text("checkpoint").pipe(Options.optional, Options.withDescription("a checkpoint kept elsewhere (wk audit checkpoint --out): the stream's checkpoint chain must hold it")),
    anchor: Options.text("anchor").pipe(Options.optional, Options.withDescription("the checkpoints anchored outside NATS, as pulled (wk audit anchor pull --out FILE): every one must be in the stream's checkpoint chain")),
    noTrust: Options.boolean("no-trust").pipe(Options.withDescription("development only: a replay without --trust and --anchor is not UNVERIFIED (it trusts the first policy record and the stream's own checkpoints)")),
    quiet: Options.boolean("quiet").pipe(Options.withDescription("no progress lines on stderr"))
  },
  (o) =>
    Effect.gen(function* () {
      const trust = Option.isSome(o.trust) ? yield* readTrustRoot(o.trust.value) : undefined
      const kept = Option.isSome(o.checkpoint) ? yield* readCheckpointFile(o.checkpoint.value) : undefined
      const anchored = Option.isSome(o.anchor) ? yield* readAnchorFile(o.anchor.value) : undefined
      const chosen = [Option.isSome(o.fromSeq), Option.isSome(o.since), Option.isSome(o.held)].filter(Boolean).length
      if (chosen > 1) return yield* Effect.fail(new Error("choose one of --from-seq, --since, --held"))
      let selection: Selection = { fromSeq: Option.getOrElse(o.fromSeq, () => 1) }
      if (Option.isSome(o.held)) selection = { held: o.held.value }
      if (Option.isSome(o.since)) {
        const t = new Date(o.since.value)
        if (Number.isNaN(t.getTime())) return yield* Effect.fail(new Error(`--since is not a time: ${o.since.value}`))
        selection = { since: t }
      }
      const report = yield* noVerdictOnSignal("replay", replayOver(natsOf(o), {
        stream: o.stream,
        selection,
        factsBucket: o.noProjection ? null : o.factsBucket,
        sessionsStream: o.sessionsStream,
        rerunPlugins: !o.noRerun,
        pluginBucket: o.pluginBucket,
        ...(trust !== undefined ? { trust } : {}),
        ...(kept !== undefined ? { keptCheckpoint: kept } : {}),
        ...(anchored !== undefined ? { anchored } : {}),
        ...(Option.isSome(o.storeSkew) ? { storeSkewMs: o.storeSkew.value * 1000 } : {}),
        ...(o.quiet ? {} : { onProgress: (p) => process.stderr.write(`${formatProgress(p)}\n`) })
      }))
      yield* Console.log(o.json ? JSON.stringify(report, null, 2) : formatReport(report))
      if (!report.registry_rooted) process.stderr.write(`wk audit: ${report.registry_origin}\n`)
      const missing = o.noTrust ? [] : unverifiedBecause(trust, anchored, kept)
      if (missing.length > 0) {
        // The last line, on stdout for a reader of the summary (stderr with --json, which stays JSON).
        const line = `UNVERIFIED: ${missing.join("; ")}: the stream vouches for itself (--no-trust for development only)`
        if (o.json) process.stderr.write(`${line}\n`)
        else yield* Console.log(line)
      }
      if (!report.ok || missing.length > 0) process.exitCode = 1
    })
).pipe(Command.withDescription("Replay WK_EVENTS, re-fold every held call and check the kernel's invariants (non-zero exit on any violation, or without a trust root and an anchor)"))

/** What an auditor must hold out of band and did not pass: nothing when the replay can be relied on. */
const unverifiedBecause = (trust: TrustRoot | undefined, anchored: ReadonlyArray<Uint8Array> | undefined, kept: Uint8Array | undefined): Array<string> => {
  const out: Array<string> = []
  if (trust === undefined) out.push("no trust root (--trust)")
  else if (trust.kernel_keys.length === 0) out.push("the trust root lists no kernel_keys")
  if (anchored === undefined && kept === undefined) out.push("no anchor (--anchor)")
  else if ((anchored?.length ?? 0) === 0 && kept === undefined) out.push("the anchor holds no checkpoint")
  return out
}

/** `wk audit export --held <id>`: one self-verifying JSON document of a held call's history. */
const exportCommand = Command.make(
  "export",
  {
    ...connection,
    held: Options.text("held").pipe(Options.withDescription("the held call to export")),
    out: Options.text("out").pipe(Options.optional, Options.withDescription("write to this file instead of stdout")),
    signWith: Options.text("sign-with").pipe(Options.optional, Options.withDescription("the kernel's key file (wk audit key): sign the export so it verifies against a trust root"))
  },
  (o) =>
    Effect.gen(function* () {
      const key = Option.isSome(o.signWith) ? yield* readKernelKey(o.signWith.value) : undefined
      const doc = yield* noVerdictOnSignal("export", exportOver(natsOf(o), { held: o.held, stream: o.stream }))
      const text = JSON.stringify(key !== undefined ? signDocument(doc, key) : doc, null, 2)
      if (Option.isSome(o.out)) writeFileSync(o.out.value, text)
      else yield* Console.log(text)
    })
).pipe(Command.withDescription("Export one held call's full history (signed envelopes, registry, public keys) as one JSON document"))

/** `wk audit verify <file>`: checks an exported document offline, with its public keys alone. */
const verifyCommand = Command.make(
  "verify",
  {
    file: Options.text("file").pipe(Options.withDescription("an exported document")),
    trust: Options.text("trust").pipe(Options.optional, Options.withDescription("trust root file: the export must be signed by one of its kernel keys")),
    json: Options.boolean("json").pipe(Options.withDescription("print the verification as JSON"))
  },
  (o) =>
    Effect.gen(function* () {
      const trust = Option.isSome(o.trust) ? yield* readTrustRoot(o.trust.value) : undefined
      const input = yield* Effect.try({ try: () => JSON.parse(readFileSync(o.file, "utf8")) as unknown, catch: (e) => new Error(`cannot read ${o.file}: ${String(e)}`) })
      const v = verifyExport(input, trust)
      if (o.json) yield* Console.log(JSON.stringify(v, null, 2))
      else {
        for (const p of v.problems) yield* Console.log(`  FAIL ${p}`)
        for (const c of v.checks) {
          yield* Console.log(`  ${c.status.padEnd(7)} ${c.name}: ${c.checked} checked`)
          for (const x of c.violations) yield* Console.log(`         seq ${x.seqs.join(",")}: ${x.message}`)
        }
        if (!v.rooted) yield* Console.log("  UNANCHORED: checked against the keys and registry the document carries; pass --trust FILE")
        yield* Console.log(v.ok ? "OK: the export verifies" : "FAILED")
      }
      if (!v.ok) process.exitCode = 1
    })
).pipe(Command.withDescription("Verify an exported held call offline"))

/** A pulled anchor file: its checkpoints' stored bytes (each is checked by the replay). */
const readAnchorFile = (path: string) =>
  Effect.try({
    try: () => {
      if (!existsSync(path)) throw new Error("no such file (wk audit anchor pull --out writes it)")
      return readAnchor(path).map((c) => c.data)
    },
    catch: (e) => new Error(`--anchor ${path}: ${e instanceof Error ? e.message : String(e)}`)
  })

/** A kept checkpoint file: the stored record's bytes, checked to decode as one. */
const readCheckpointFile = (path: string) =>
  Effect.try({
    try: () => {
      const data = new Uint8Array(readFileSync(path))
      const d = decodeCheckpoint(data)
      if (Either.isLeft(d)) throw new Error(`not a checkpoint: ${d.left.message.slice(0, 200)}`)
      return data
    },
    catch: (e) => new Error(`--checkpoint ${path}: ${e instanceof Error ? e.message : String(e)}`)
  })

/**
 * `wk audit checkpoint`: the newest signed checkpoint of WK_EVENTS, to keep outside the stream
 * (`--out`); with `--key` (the kernel's key file) it first signs and stores a new one, as the
 * kernel does every `WK_CHECKPOINT_INTERVAL_MS`.
 */
const checkpointCommand = Command.make(
  "checkpoint",
  {
    user: connection.user,
    pass: connection.pass,
    out: Options.text("out").pipe(Options.optional, Options.withDescription("write the checkpoint (its stored bytes) to this file instead of stdout")),
    key: Options.text("key").pipe(Options.optional, Options.withDescription("the kernel's key file: sign and store a new checkpoint first (needs a NATS user that may write WK_EVENTS; default the kernel's)"))
  },
  (o) =>
    Effect.gen(function* () {
      const key = Option.isSome(o.key) ? yield* readKernelKey(o.key.value) : undefined
      const fromUrl = natsOptionsFor(key !== undefined ? "kernel" : "auditor")
      const role = key !== undefined ? "kernel" : "auditor"
      const nats: NatsOptions = { ...fromUrl, user: Option.getOrElse(o.user, () => fromUrl.user ?? role), pass: Option.getOrElse(o.pass, () => fromUrl.pass ?? `${role}-dev`) }
      const stored = yield* Effect.gen(function* () {
        if (key !== undefined) {
          const written = yield* writeCheckpoint(key, new Date())
          if (written !== null) return written
        }
        return yield* latestCheckpoint
      }).pipe(
        Effect.provide(Layer.mapError(layerNats({ name: "wk-checkpoint", ...nats }), (e) => new Error(`connect: ${e.message}`))),
        Effect.mapError((e) => new Error(e.message))
      )
      if (stored === null) return yield* Effect.fail(new Error("WK_EVENTS holds no checkpoint yet: a kernel with a signing key writes one every WK_CHECKPOINT_INTERVAL_MS, or pass --key"))
      if (!checkpointSignatureValid(stored.checkpoint)) return yield* Effect.fail(new Error(`the newest checkpoint (seq ${stored.seq}) does not verify under its key`))
      const c = stored.checkpoint
      process.stderr.write(`checkpoint seq ${stored.seq}: covers ${c.from_seq}..${c.last_seq}, ${c.heads.length} head(s), signed by ${c.key}\n`)
      if (Option.isSome(o.out)) writeFileSync(o.out.value, stored.data)
      else yield* Console.log(new TextDecoder().decode(stored.data))
    })
).pipe(Command.withDescription("Print or save the newest signed checkpoint of WK_EVENTS (to keep elsewhere); --key signs a new one first"))

/**
 * `wk audit key --out FILE`: a new kernel signing key; prints its public key for trust roots.
 * With `--rotate-from OLD`, the old key hands its authority on to the new one: a rotation record
 * signed by both is stored in WK_EVENTS (as the kernel user), so auditors whose root lists the old
 * key trust the new one for what is stored after the record.
 */
const keyCommand = Command.make(
  "key",
  {
    out: Options.text("out").pipe(Options.withDescription("the key file to create (mode 0600; an existing file is never overwritten)")),
    rotateFrom: Options.text("rotate-from").pipe(Options.optional, Options.withDescription("the key file of the kernel key in use: record in WK_EVENTS that it hands on to the new key")),
    user: connection.user,
    pass: connection.pass
  },
  (o) =>
    Effect.gen(function* () {
      const old = Option.isSome(o.rotateFrom) ? yield* readKernelKey(o.rotateFrom.value) : undefined
      const publicKey = yield* Effect.try({ try: () => generateKernelKey(o.out), catch: (e) => new Error(`cannot create ${o.out}: ${String(e)}`) })
      if (old !== undefined) {
        const fresh = yield* readKernelKey(o.out)
        const fromUrl = natsOptionsFor("kernel")
        const nats: NatsOptions = { ...fromUrl, user: Option.getOrElse(o.user, () => fromUrl.user ?? "kernel"), pass: Option.getOrElse(o.pass, () => fromUrl.pass ?? "kernel-dev") }
        const stored = yield* recordKeyRotation(old, fresh, new Date()).pipe(
          Effect.provide(Layer.mapError(layerNats({ name: "wk-key-rotation", ...nats }), (e) => new Error(`connect: ${e.message}`))),
          Effect.mapError((e) => new Error(`the new key ${o.out} was made but its rotation was not recorded: ${e.message}`))
        )
        process.stderr.write(`rotation recorded at seq ${stored.seq}: ${old.publicKey} -> ${publicKey}; restart the kernels with WK_KERNEL_KEY=${o.out}\n`)
      }
      yield* Console.log(publicKey)
    })
).pipe(Command.withDescription("Create a kernel signing key and print its public key for the trust root's kernel_keys; --rotate-from records the hand-over from the key in use"))

/** `wk audit anchor pull`: the checkpoints a kernel anchored outside NATS, into the auditor's own copy. */
const anchorPullCommand = Command.make(
  "pull",
  {
    from: Options.text("from").pipe(Options.optional, Options.withDescription("the kernel's anchor file (WK_ANCHOR_FILE, or a copy of it; default WK_ANCHOR_FILE)")),
    out: Options.text("out").pipe(Options.withDescription("the auditor's copy: new checkpoints are appended; a rewritten anchor is refused"))
  },
  (o) =>
    Effect.gen(function* () {
      const from = Option.getOrElse(o.from, () => process.env["WK_ANCHOR_FILE"] ?? "")
      if (from === "") return yield* Effect.fail(new Error("pass --from (the kernel's WK_ANCHOR_FILE)"))
      const pulled = yield* Effect.try({ try: () => pullAnchor(from, o.out), catch: (e) => new Error(`wk audit anchor pull: ${e instanceof Error ? e.message : String(e)}`) })
      yield* Console.log(`${pulled.added} checkpoint(s) pulled into ${o.out}, ${pulled.total} held${pulled.newest !== undefined ? `; the newest, checkpoint seq ${pulled.newest.seq}, covers up to seq ${pulled.newest.last_seq}` : ""}`)
    })
).pipe(Command.withDescription("Copy new anchored checkpoints into the auditor's own file (refuses an anchor whose earlier lines changed)"))

const anchorCommand = Command.make("anchor").pipe(
  Command.withDescription("Checkpoints anchored outside NATS"),
  Command.withSubcommands([anchorPullCommand])
)

/** `wk audit`: replay, export and verify. */
export const auditCommand = Command.make("audit").pipe(
  Command.withDescription("Auditor tools: replay the log and check every decision, export one call"),
  Command.withSubcommands([replayCommand, exportCommand, verifyCommand, checkpointCommand, keyCommand, anchorCommand])
)
