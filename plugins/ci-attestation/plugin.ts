// CI / external attestation: a covered call (a deploy, a release) names a commit digest and
// waits for the CI principal to attest that commit's status. Adjudicate: the commit must be a
// 40- or 64-hex git digest (else denied), and the call needs a witness. Witness contract: the
// CI principal (or class) must approve; the summary names the commit and the status required,
// and since the contract digest covers it, an attestation binds to exactly that commit.
//   config: { "tools": ["deploy"], "commit_field"?: "commit", "status"?: "success", "principal"?: "ci:build", "class"?: "ci" }
import {
  runAdjudicate, runWitnessContract, AdjudicateInput, WitnessContractInput, ContractOffer, Contract, Opinion, stringList, toolMatches
} from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

export function witness_contract(): i32 {
  return runWitnessContract(offer)
}

function isDigest(s: string): bool {
  if (s.length != 40 && s.length != 64) return false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false
  }
  return true
}

function decide(input: AdjudicateInput): Opinion {
  if (!toolMatches(stringList(input.config.getArr("tools")), input.proposal.tool)) return Opinion.defer()
  const field = input.config.getStr("commit_field", "commit")
  const commit = input.proposal.args.getStr(field)
  if (!isDigest(commit)) return Opinion.deny("argument '" + field + "' must be a commit digest (40 or 64 lowercase hex)")
  return Opinion.witness(input.proposal.tool + " of " + commit + " needs CI status '" + input.config.getStr("status", "success") + "'")
}

function offer(input: WitnessContractInput): ContractOffer {
  if (!toolMatches(stringList(input.config.getArr("tools")), input.proposal.tool)) return ContractOffer.none()
  const commit = input.proposal.args.getStr(input.config.getStr("commit_field", "commit"))
  const summary = "CI status '" + input.config.getStr("status", "success") + "' for commit " + commit
  const who = input.config.getStr("principal")
  const contract = who.length > 0 ? Contract.ofPrincipal(who, summary) : Contract.ofClass(input.config.getStr("class", "ci"), 1, summary)
  return ContractOffer.of(contract, "CI attestation for " + commit)
}
