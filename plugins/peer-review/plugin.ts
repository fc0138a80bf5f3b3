// Peer review by another agent: a covered call (merging code, changing a config) needs the
// approval of `count` reviewers of a reviewer class, which the profile gives to agents running
// under their own principals and grants. The kernel already refuses an attestation by the
// proposer (same principal or key), so an agent cannot review itself.
//   config: { "tools": ["merge_pr"], "class"?: "peer-reviewer", "count"?: 1 }
import {
  runAdjudicate, runWitnessContract, AdjudicateInput, WitnessContractInput, ContractOffer, Contract, Opinion, stringList, toolMatches
} from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

export function witness_contract(): i32 {
  return runWitnessContract(offer)
}

function decide(input: AdjudicateInput): Opinion {
  if (!toolMatches(stringList(input.config.getArr("tools")), input.proposal.tool)) return Opinion.defer()
  return Opinion.witness(input.proposal.tool + " needs review by another agent")
}

function offer(input: WitnessContractInput): ContractOffer {
  if (!toolMatches(stringList(input.config.getArr("tools")), input.proposal.tool)) return ContractOffer.none()
  const cls = input.config.getStr("class", "peer-reviewer")
  const count = <i32>input.config.getNum("count", 1)
  const summary = "peer review of " + input.proposal.tool + " " + input.proposal.args.stringify() + " proposed by " + input.proposal.principal
  return ContractOffer.of(Contract.ofClass(cls, count < 1 ? 1 : count, summary), "review by " + cls)
}
