import { Context, Effect, Either, Option } from "effect"
import { readKernelKey } from "./KernelKey.js"
import type { CommitKey } from "../schema/Commit.js"

/**
 * The key the kernel signs its commits with (`wk audit key` makes one; its public key goes into
 * auditors' trust roots as a `kernel_keys` entry). Provided explicitly, or read from the file
 * `WK_KERNEL_KEY` names; without either the kernel still runs and its commits carry the chain
 * (`prev`) only, which an audit reports as unsigned.
 */
export class CommitSigningKey extends Context.Tag("wk/CommitSigningKey")<CommitSigningKey, CommitKey | undefined>() {}

/** The key from `WK_KERNEL_KEY` (undefined when unset); a named file that does not read is a defect that stops start-up. */
export const commitKeyFromEnv = (): CommitKey | undefined => {
  const path = process.env["WK_KERNEL_KEY"]
  if (path === undefined || path === "") return undefined
  const key = readKernelKey(path)
  if (Either.isLeft(key)) throw new Error(`WK_KERNEL_KEY: ${key.left.message}`)
  return key.right
}

/** The signing key in effect: the provided one, else `WK_KERNEL_KEY`'s. */
export const commitSigningKey: Effect.Effect<CommitKey | undefined> = Effect.flatMap(Effect.serviceOption(CommitSigningKey), (provided) =>
  Option.isSome(provided) ? Effect.succeed(provided.value) : Effect.sync(commitKeyFromEnv)
)
