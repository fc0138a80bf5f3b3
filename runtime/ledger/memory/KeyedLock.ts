import { Effect } from "effect"

interface Entry {
  readonly semaphore: Effect.Semaphore
  users: number
  /** Resolved when the last user leaves; made when someone asks. */
  idle?: { readonly promise: Promise<void>; readonly resolve: () => void }
}

/**
 * Runs effects one at a time per key (a semaphore per key, dropped when nobody waits on it);
 * `whenIdle(key)` resolves when every effect queued on the key so far has ended, `whenAllIdle()`
 * when nothing is queued on any key.
 */
export const keyedLock = () => {
  const locks = new Map<string, Entry>()
  const run = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let entry = locks.get(key)
      if (entry === undefined) {
        entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
        locks.set(key, entry)
      }
      const held = entry
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            if (--held.users > 0) return
            locks.delete(key)
            held.idle?.resolve()
          })
        )
      )
    })
  const whenIdle = (key: string): Promise<void> | undefined => {
    const entry = locks.get(key)
    if (entry === undefined) return undefined
    if (entry.idle === undefined) {
      let resolve!: () => void
      const promise = new Promise<void>((r) => (resolve = r))
      entry.idle = { promise, resolve }
    }
    return entry.idle.promise
  }
  /** Resolves when no effect is queued or running on any key. */
  const whenAllIdle = async (): Promise<void> => {
    while (locks.size > 0) await Promise.all([...locks.keys()].map(whenIdle))
  }
  return { run, whenIdle, whenAllIdle }
}
