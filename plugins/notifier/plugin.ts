// Observer: tells people what needs them. A held call (REQUIRE_WITNESS) is published to the
// approvals channel, a denial or a quarantined result to the security channel, each as
// `{kind, principal, tool, verdict, reasons, text}` on `<subject_prefix><channel>`. Allowed
// calls and admitted results are not news. Observers never change a decision.
//   config: { "subject_prefix"?: "wk.notify.", "channels"?: { "held": "approvals", "denied": "security", "quarantined": "security" } }
import { runObserve, ObserveInput, JObj, publish } from "../../plugin-sdk/assembly/index"

export function observe(): i32 {
  return runObserve(notify)
}

function notify(input: ObserveInput): void {
  const raw = input.raw
  const verdict = raw.getStr("verdict")
  let kind = ""
  if (input.event == "adjudicated" && verdict == "REQUIRE_WITNESS") kind = "held"
  else if (input.event == "adjudicated" && verdict == "DENY") kind = "denied"
  else if (input.event == "quarantined") kind = "quarantined"
  if (kind.length == 0) return
  const channels = input.config.getObj("channels")
  const channel = channels.getStr(kind, kind == "held" ? "approvals" : "security")
  const tool = raw.getStr("tool"), principal = raw.getStr("principal")
  const text = kind == "held" ? tool + " by " + principal + " is waiting for a witness" : kind == "denied" ? tool + " by " + principal + " was denied" : "a result of " + tool + " for " + principal + " was quarantined"
  const msg = new JObj().setStr("kind", kind).setStr("principal", principal).setStr("tool", tool).setStr("verdict", verdict).set("reasons", raw.getArr("reasons")).setStr("text", text)
  publish(input.config.getStr("subject_prefix", "wk.notify.") + channel, msg.stringify())
}
