/**
 * The connection chosen on the command line: `--server URL` and `--context NAME` may appear
 * anywhere in any `wk` command; main.ts takes them out of the arguments before parsing the
 * rest and records them here. (Kept apart from Context.ts so that recording them loads nothing.)
 * One object per process, kept on globalThis: the bundled CLI runs the dispatcher and the
 * commands from separate bundles (runtime/cli/bundleCli.mjs), each with its own copy of this module.
 */
const key = Symbol.for("witness-kernel.cli.selection")
const holder = globalThis as { [key]?: { server?: string; context?: string } }

export const globalSelection: { server?: string; context?: string } = (holder[key] ??= {})
