import { Schema } from "effect"
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/**
 * Who holds a store folder (`WK_DATA_DIR`, `.wk/` by default): the `wk start` process, the
 * nats-server it runs on the store once it runs, and how to reach that server.
 */
export const StoreOwner = Schema.Struct({
  pid: Schema.Number,
  started_at: Schema.String,
  nats_pid: Schema.optional(Schema.Number),
  nats_url: Schema.optional(Schema.String)
})
export type StoreOwner = typeof StoreOwner.Type

/** The lock file's name inside the store folder. */
export const StoreLockFile = "wk.lock"

/** A second start on a store another process holds: one line naming the holder and what to do. */
export class StoreInUse extends Error {
  constructor(readonly dir: string, readonly owner: StoreOwner, readonly orphan: boolean) {
    super(
      orphan
        ? `the store ${dir} is still served by nats-server (pid ${owner.nats_pid}${owner.nats_url !== undefined ? `, ${owner.nats_url}` : ""}) of a wk start that is gone: stop it (kill ${owner.nats_pid}) and start again, or set WK_DATA_DIR to another folder`
        : `the store ${dir} is held by wk start (pid ${owner.pid}${owner.nats_url !== undefined ? `, NATS ${owner.nats_url}` : ""}, since ${owner.started_at}): stop that instance (Ctrl-C in its terminal, or kill ${owner.pid})${owner.nats_url !== undefined ? `, or use it (--server ${owner.nats_url})` : ""}, or set WK_DATA_DIR to another folder for a second instance`
    )
  }
}

/**
 * Whether a process runs with this pid, and (where /proc says what it runs) runs `program`: a
 * pid reused by an unrelated process after a crash does not hold the store.
 */
const runs = (pid: number | undefined, program: string): boolean => {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  const cmdline = `/proc/${pid}/cmdline`
  if (!existsSync("/proc/self/cmdline")) return true
  try {
    return readFileSync(cmdline, "utf8").includes(program)
  } catch {
    return false
  }
}

const decodeOwner = Schema.decodeUnknownOption(Schema.parseJson(StoreOwner))

/** The store's holder as its lock file names it, or undefined (no lock, or an unreadable one). */
export const storeOwner = (dir: string): StoreOwner | undefined => {
  try {
    const o = decodeOwner(readFileSync(join(dir, StoreLockFile), "utf8"))
    return o._tag === "Some" ? o.value : undefined
  } catch {
    return undefined
  }
}

/** Whether a lock's holder is gone, and whether it left its nats-server running on the store. */
const stateOf = (owner: StoreOwner | undefined): "live" | "orphan" | "stale" =>
  owner === undefined ? "stale" : runs(owner.pid, "node") ? "live" : runs(owner.nats_pid, "nats-server") ? "orphan" : "stale"

export interface StoreLock {
  readonly path: string
  /** Records the nats-server this process runs on the store (its pid and URL), for the next start's message. */
  readonly serving: (natsPid: number, natsUrl: string) => void
  /** Removes the lock file if it still names this process. */
  readonly release: () => void
}

/**
 * Takes the store folder `dir` for this process: creates `wk.lock` exclusively with this pid.
 * A lock whose process is gone (and whose nats-server is gone too) is stale and replaced; a live
 * one, or a nats-server left running on the store, throws `StoreInUse`.
 */
export const lockStore = (dir: string): StoreLock => {
  mkdirSync(dir, { recursive: true })
  const path = join(dir, StoreLockFile)
  let mine: StoreOwner = { pid: process.pid, started_at: new Date().toISOString() }
  const write = (flag: "wx" | "w") => writeFileSync(path, `${JSON.stringify(mine)}\n`, { flag, mode: 0o644 })
  for (let attempt = 0; ; attempt++) {
    try {
      write("wx")
      break
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
    }
    const owner = storeOwner(dir)
    const state = stateOf(owner)
    if (state !== "stale" && owner !== undefined) throw new StoreInUse(dir, owner, state === "orphan")
    // A holder that is gone: its lock is replaced. A second pass that finds a lock again lost a
    // race with another start, which holds the store now.
    if (attempt > 0) throw new StoreInUse(dir, owner ?? mine, false)
    try {
      unlinkSync(path)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
    }
  }
  return {
    path,
    serving: (natsPid, natsUrl) => {
      mine = { ...mine, nats_pid: natsPid, nats_url: natsUrl }
      write("w")
    },
    release: () => {
      if (storeOwner(dir)?.pid !== process.pid) return
      try {
        unlinkSync(path)
      } catch {
        // already gone
      }
    }
  }
}
