// Result admission: quarantines a result that contains a secret marker (never echoes it).
//   config: { "markers": ["-----BEGIN", "AKIA", "sk_live_", "ghp_"] }
import { runAdmit, AdmitInput, Admission, containsText } from "../../plugin-sdk/assembly/index"

export function admit(): i32 {
  return runAdmit(scan)
}

const Defaults: string[] = ["-----BEGIN", "AKIA", "sk_live_", "ghp_", "xoxb-"]

function scan(input: AdmitInput): Admission {
  const configured = input.config.getArr("markers")
  const markers = new Array<string>()
  for (let i = 0; i < configured.length; i++) if (configured.at(i).isStr()) markers.push(configured.at(i).asStr().value)
  if (markers.length == 0) for (let i = 0; i < Defaults.length; i++) markers.push(Defaults[i])
  for (let i = 0; i < markers.length; i++) {
    if (containsText(input.result, markers[i])) return Admission.quarantine("result contains secret marker #" + i.toString())
  }
  return Admission.admit()
}
