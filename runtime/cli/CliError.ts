import { Schema } from "effect"

/** A CLI failure: one line that says what to do, and the exit code it ends the command with. */
export class CliError extends Schema.TaggedError<CliError>()("CliError", { message: Schema.String, exit: Schema.optional(Schema.Number) }) {}
