import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, FiberId, Logger, LogLevel } from "effect"
import { failedRequestResponse } from "../../runtime/gateway/Gateway.js"

// A request the gateway did not complete: interrupted (its client went away, as when a page
// reloads while its files load) it is no gateway error, so operators alerting on 5xx and on
// error logs do not see it; a defect is logged and answered 500.
const answered = (cause: Cause.Cause<unknown>) =>
  Effect.gen(function* () {
    const logged: Array<{ readonly level: LogLevel.LogLevel; readonly message: unknown }> = []
    const collect = Logger.make(({ logLevel, message }) => void logged.push({ level: logLevel, message }))
    const response = yield* failedRequestResponse(cause).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collect)), Logger.withMinimumLogLevel(LogLevel.All))
    return { response, errors: logged.filter((l) => LogLevel.greaterThanEqual(l.level, LogLevel.Error)) }
  })

describe("a request the gateway did not complete", () => {
  it.effect("given its fiber interrupted, when answered, then it is 499 and no error is logged", () =>
    Effect.gen(function* () {
      const { response, errors } = yield* answered(Cause.interrupt(FiberId.none))
      expect(response.status).toBe(499)
      expect(errors).toEqual([])
    })
  )

  it.effect("given a defect, when answered, then it is a JSON 500 and the cause is logged as an error", () =>
    Effect.gen(function* () {
      const { response, errors } = yield* answered(Cause.die(new Error("boom")))
      expect(response.status).toBe(500)
      expect(errors).toHaveLength(1)
    })
  )

  it.effect("given an interruption together with a failure, when answered, then it is a defect (500, logged)", () =>
    Effect.gen(function* () {
      const { response, errors } = yield* answered(Cause.sequential(Cause.interrupt(FiberId.none), Cause.fail("lost")))
      expect(response.status).toBe(500)
      expect(errors).toHaveLength(1)
    })
  )
})
