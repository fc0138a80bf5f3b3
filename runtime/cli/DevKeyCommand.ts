import { Args, Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { existsSync, writeFileSync } from "node:fs"
import { devKeyPair } from "../client/DevKeys.js"
import type { KeyFile } from "../plugins/Signing.js"
import { CliError } from "./CliError.js"

/**
 * `wk dev-key <principal>`: the principal's development key (derived from its name, so anyone can
 * derive it: the example profiles register these, a real deployment never does). It prints the
 * public key, or writes a key file for `--key` and `wk context add --key`, or the secret key the
 * web inbox asks for.
 */
export const devKeyCommand = Command.make(
  "dev-key",
  {
    principal: Args.text({ name: "principal" }).pipe(Args.withDescription("the principal, for example user:carol")),
    out: Options.file("out").pipe(Options.optional, Options.withDescription("write a key file (the format of `wk keygen`) instead of printing")),
    force: Options.boolean("force").pipe(Options.withDescription("replace an existing --out file")),
    json: Options.boolean("json").pipe(Options.withDescription("print the key file JSON (public and secret key, base64)"))
  },
  ({ principal, out, force, json }) =>
    Effect.gen(function* () {
      const kp = devKeyPair(principal)
      const key: KeyFile = { type: "ed25519", public_key: Buffer.from(kp.publicKey).toString("base64"), secret_key: Buffer.from(kp.secretKey).toString("base64") }
      if (out._tag === "Some") {
        if (existsSync(out.value) && !force) return yield* new CliError({ message: `${out.value} exists (pass --force to replace it)` })
        writeFileSync(out.value, JSON.stringify(key, null, 2) + "\n", { mode: 0o600 })
        return yield* Console.log(`wrote ${out.value}: ${principal}'s development key (public ${key.public_key})`)
      }
      yield* Console.log(json ? JSON.stringify(key, null, 2) : [`principal   ${principal} (development key: never register it outside development)`, `public key  ${key.public_key}`, `secret key  ${key.secret_key}`].join("\n"))
    })
).pipe(Command.withDescription("Print or write a principal's development key (derived from its name; example profiles only)"))
