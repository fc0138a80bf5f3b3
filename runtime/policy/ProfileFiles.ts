import { Effect, Either, Schema } from "effect"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { decodeWith } from "../schema/DecodeWith.js"
import { Profile } from "../schema/Profile.js"
import { checkLayers } from "./Layers.js"

/** A profile file that does not parse or decode; the message names the file and the field. */
export class ProfileFileError extends Schema.TaggedError<ProfileFileError>()("ProfileFileError", {
  file: Schema.String,
  message: Schema.String
}) {}

/** Profile documents from a file or every `*.json` in a directory, sorted by name; layers are checked (narrow only). */
export const loadProfileFiles = (path: string) =>
  Effect.gen(function* () {
    const files = yield* Effect.try({
      try: () => (statSync(path).isDirectory() ? readdirSync(path).filter((f) => f.endsWith(".json")).sort().map((f) => join(path, f)) : [path]),
      catch: () => new ProfileFileError({ file: path, message: `${path}: no such profile file or directory` })
    })
    const profiles: Array<Profile> = []
    for (const file of files) {
      const json = yield* Effect.try({
        try: () => JSON.parse(readFileSync(file, "utf8")) as unknown,
        catch: (e) => new ProfileFileError({ file, message: `${file}: not JSON: ${(e as Error).message}` })
      })
      const decoded = decodeWith(Profile, json)
      if (Either.isLeft(decoded)) {
        const err = decoded.left["error"] as { message: string }
        return yield* new ProfileFileError({ file, message: `${file}: ${err.message}` })
      }
      profiles.push(decoded.right)
    }
    // A narrow-only layer that widens a lower one refuses the whole set (runtime/policy/Layers.ts).
    const widening = checkLayers(profiles)[0]
    if (widening !== undefined) return yield* new ProfileFileError({ file: path, message: widening.message })
    return profiles
  })
