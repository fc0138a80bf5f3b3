import { Options } from "@effect/cli"

/** The principal a witness command signs as. */
export const principalOpt = Options.text("principal").pipe(Options.withDescription("the principal you sign as (registered in the profile)"))
/** The key it signs with; without one, the principal's development key. */
export const keyOpt = Options.file("key", { exists: "yes" }).pipe(Options.optional, Options.withDescription("key file from `wk keygen` (default: the principal's dev key, development only)"))
/** Prints the kernel's reply as JSON instead of a line for people. */
export const json = Options.boolean("json").pipe(Options.withDescription("print the reply as JSON"))
