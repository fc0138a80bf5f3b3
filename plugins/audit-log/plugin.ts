// Observer: writes one kernel log line per adjudication and per admission outcome.
import { runObserve, ObserveInput, log } from "../../plugin-sdk/assembly/index"

export function observe(): i32 {
  return runObserve(record)
}

function record(input: ObserveInput): void {
  log(input.event + " " + input.raw.getStr("tool") + " by " + input.raw.getStr("principal") + ": " + input.raw.getStr("verdict"))
}
