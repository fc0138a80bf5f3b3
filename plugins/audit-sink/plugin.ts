// Observer: an audit projection sink. Publishes one JSON record per outcome (adjudicated,
// admitted, quarantined) to `<subject_prefix><event>` for a downstream projection (a SIEM, a
// compliance store). Argument values stay out unless `include_args` (their names always go).
// Observers never change a decision; a failed publish is the sink's loss.
//   config: { "subject_prefix"?: "wk.audit.", "include_args"?: false }
import { runObserve, ObserveInput, JArr, JObj, JStr, publish } from "../../plugin-sdk/assembly/index"

export function observe(): i32 {
  return runObserve(record)
}

function record(input: ObserveInput): void {
  const raw = input.raw
  const rec = new JObj()
    .setStr("event", input.event)
    .setStr("principal", raw.getStr("principal"))
    .setStr("tool", raw.getStr("tool"))
    .setStr("verdict", raw.getStr("verdict"))
    .set("reasons", raw.getArr("reasons"))
    .setNum("at", <f64>input.now)
  const args = raw.get("args")
  if (input.config.getBool("include_args")) {
    if (args !== null) rec.set("args", args)
  } else {
    const names = new JArr()
    if (args !== null && args.isObj()) for (let i = 0; i < args.asObj().keys.length; i++) names.push(new JStr(args.asObj().keys[i]))
    rec.set("arg_names", names)
  }
  publish(input.config.getStr("subject_prefix", "wk.audit.") + input.event, rec.stringify())
}
