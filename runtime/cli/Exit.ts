/**
 * The exit codes of `wk` (docs/cli.md). Scripts branch on them, so each outcome a person or a
 * script must tell apart has its own code.
 */
export const ExitCode = {
  /** The command did what it was asked: the call was allowed and completed, the read succeeded. */
  ok: 0,
  /** Anything else went wrong (a kernel error, a check that failed, a file that cannot be read). */
  failed: 1,
  /** The command line itself is wrong (unknown command or option, a value of the wrong kind). */
  usage: 2,
  /** The call is held: it waits for witnesses (202). */
  held: 3,
  /** Policy denied the call (403). */
  denied: 4,
  /** The kernel refused the request as malformed, unknown, stale or in conflict (400, 404, 409, 422). */
  refused: 5,
  /** Who you are was not accepted: a bad signature or unknown principal (401), or NATS refused the user and password. */
  unauthenticated: 6,
  /** Nothing answered: no NATS server at the URL, or no kernel behind it (no responders, timeout, 503, 504). */
  unreachable: 7,
  /** The call ran and the tool reported a failure (completed with `ok: false`). */
  toolFailed: 8
} as const

/** The exit code of a kernel reply, by its status (and, for a completed call, the tool's `ok`). */
export const exitOfReply = (reply: { status: number; ok?: boolean }): number => {
  if (reply.status === 200 || reply.status === 201) return reply.ok === false ? ExitCode.toolFailed : ExitCode.ok
  if (reply.status === 202) return ExitCode.held
  if (reply.status === 401) return ExitCode.unauthenticated
  if (reply.status === 403) return ExitCode.denied
  if (reply.status === 503 || reply.status === 504) return ExitCode.unreachable
  if (reply.status >= 400 && reply.status < 500) return ExitCode.refused
  return ExitCode.failed
}
