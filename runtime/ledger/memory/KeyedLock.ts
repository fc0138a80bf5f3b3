import { Effect } from "effect"

/** Runs effects one at a time per key (a semaphore per key, dropped when nobody waits on it). */
export const keyedLock = () => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
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
            if (--held.users === 0) locks.delete(key)
          })
        )
      )
    })
}
