/**
 * The connection chosen on the command line: `--server URL` and `--context NAME` may appear
 * anywhere in any `wk` command; main.ts takes them out of the arguments before parsing the
 * rest and records them here. (Kept apart from Context.ts so that recording them loads nothing.)
 */
export const globalSelection: { server?: string; context?: string } = {}
