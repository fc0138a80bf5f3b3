/**
 * How long the hot streams keep what, and when ended held calls move to the archive. Sizes in
 * bytes, times in ms; a limit of 0 is none.
 *
 * `WK_EVENTS` keeps every event until its call is archived: its byte limit refuses new appends
 * when reached (discard new: the kernel fails closed rather than losing audit records), and it
 * has no age limit by default (an age limit would also age out open calls' events and the
 * `_policy` and `_archive` records the audit starts from). `WK_SESSIONS` holds copies of
 * deliveries: old ones are discarded by age and size.
 */
export interface RetentionConfig {
  readonly eventsMaxBytes: number
  readonly eventsMaxAgeMs: number
  readonly sessionsMaxBytes: number
  readonly sessionsMaxAgeMs: number
  /** An ended, quiescent held call whose last event is older than this is archived; 0: never. */
  readonly archiveAfterMs: number
  /** How often a kernel looks for calls to archive. */
  readonly archiveIntervalMs: number
  /** Most held calls one archive object holds. */
  readonly archiveBatch: number
  /**
   * The NATS login archiving runs as (`WK_RETENTION_USER`, `WK_RETENTION_PASS`; nats.conf
   * `retention`): the only login that may purge `WK_EVENTS`. Without one the kernel does not
   * archive (its own login cannot purge).
   */
  readonly login?: RetentionLogin
}

/** A NATS user and password. */
export interface RetentionLogin {
  readonly user: string
  readonly pass: string
}

/** The retention login from `WK_RETENTION_USER` and `WK_RETENTION_PASS`, when set. */
export const retentionLoginFromEnv = (): RetentionLogin | undefined => {
  const user = process.env["WK_RETENTION_USER"]
  if (user === undefined || user === "") return undefined
  return { user, pass: process.env["WK_RETENTION_PASS"] ?? "" }
}

const GiB = 1024 * 1024 * 1024
const Day = 24 * 60 * 60 * 1000

export const DefaultRetention: RetentionConfig = {
  eventsMaxBytes: 2 * GiB,
  eventsMaxAgeMs: 0,
  sessionsMaxBytes: GiB / 2,
  sessionsMaxAgeMs: 7 * Day,
  archiveAfterMs: Day,
  archiveIntervalMs: 10 * 60 * 1000,
  archiveBatch: 500
}

const fromEnv = (name: string, fallback: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}: expected a number >= 0, got '${raw}'`)
  return n
}

/** The retention in force: overrides, else `WK_*` environment variables, else the defaults. */
export const retentionOf = (overrides: Partial<RetentionConfig> = {}): RetentionConfig => ({
  eventsMaxBytes: overrides.eventsMaxBytes ?? fromEnv("WK_EVENTS_MAX_BYTES", DefaultRetention.eventsMaxBytes),
  eventsMaxAgeMs: overrides.eventsMaxAgeMs ?? fromEnv("WK_EVENTS_MAX_AGE_MS", DefaultRetention.eventsMaxAgeMs),
  sessionsMaxBytes: overrides.sessionsMaxBytes ?? fromEnv("WK_SESSIONS_MAX_BYTES", DefaultRetention.sessionsMaxBytes),
  sessionsMaxAgeMs: overrides.sessionsMaxAgeMs ?? fromEnv("WK_SESSIONS_MAX_AGE_MS", DefaultRetention.sessionsMaxAgeMs),
  archiveAfterMs: overrides.archiveAfterMs ?? fromEnv("WK_ARCHIVE_AFTER_MS", DefaultRetention.archiveAfterMs),
  archiveIntervalMs: overrides.archiveIntervalMs ?? fromEnv("WK_ARCHIVE_INTERVAL_MS", DefaultRetention.archiveIntervalMs),
  archiveBatch: overrides.archiveBatch ?? fromEnv("WK_ARCHIVE_BATCH", DefaultRetention.archiveBatch),
  ...withLogin("login" in overrides ? overrides.login : retentionLoginFromEnv())
})

const withLogin = (login: RetentionLogin | undefined): { readonly login?: RetentionLogin } => (login === undefined ? {} : { login })
