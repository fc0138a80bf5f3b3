// Witness-contract provider: calls to tools under a prefix need witnesses of one class.
//   config: { "tool_prefix": "payments.", "class": "finance", "count": 1 }
import { runWitnessContract, WitnessContractInput, ContractOffer, Contract } from "../../plugin-sdk/assembly/index"

export function witness_contract(): i32 {
  return runWitnessContract(offer)
}

function offer(input: WitnessContractInput): ContractOffer {
  const prefix = input.config.getStr("tool_prefix", "payments.")
  if (!input.proposal.tool.startsWith(prefix)) return ContractOffer.none()
  const cls = input.config.getStr("class", "finance")
  const count = <i32>input.config.getNum("count", 1)
  return ContractOffer.of(Contract.ofClass(cls, count, cls + " approval for " + input.proposal.tool), "tools under " + prefix + " need " + cls)
}
