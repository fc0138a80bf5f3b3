import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import { routeAdmits } from "../schema/WitnessContract.js"
import { sharedNamespace, type WitnessRegistry } from "./Counting.js"
import { ruleStatus } from "./WitnessRuleEval.js"

/**
 * Whether a user's `witness_route` may narrow a hold that policy caused. A route only chooses
 * among the witnesses the contract already admits: it is applied when the registered witnesses
 * it admits (independent of the proposer, with a key) could meet the contract's rule on their
 * own; otherwise it is ignored, the contract keeps every witness it admits, and the reason is
 * recorded with the decision. So a route never makes a contract unsatisfiable and never admits
 * anyone the contract does not: "use CI rather than a reviewer" holds only where the contract
 * admits CI. Pure: the policy's registry and the call are the only inputs.
 */
export type PolicyRouteChoice =
  | { readonly applied: true; readonly witnesses: ReadonlyArray<string>; readonly reason: string }
  | { readonly applied: false; readonly witnesses: ReadonlyArray<string>; readonly reason: string }

/** Who proposes, and in which session (a witness in the proposer's namespace is not independent). */
export interface RouteCaller {
  readonly principal: string
  readonly session_id: string
}

const show = (rule: WitnessRule): string => JSON.stringify(rule)

export const choosePolicyRoute = (contract: WitnessContract, route: WitnessRule, registry: WitnessRegistry, caller: RouteCaller): PolicyRouteChoice => {
  const witnesses = registry
    .principals()
    .filter(
      (p) =>
        p !== caller.principal &&
        registry.keysOf(p).length > 0 &&
        sharedNamespace(registry, p, caller.principal, caller.session_id) === undefined &&
        routeAdmits(route, p, registry.classesOf(p))
    )
    .sort()
  const possible = witnesses.flatMap((w) => registry.classesOf(w).map((c) => ({ witness: w, class: c })))
  if (witnesses.length === 0) {
    return { applied: false, witnesses, reason: `witness route ${show(route)} ignored: it admits no registered witness independent of the proposer; every witness the contract admits is asked` }
  }
  if (ruleStatus(contract.rule, [], possible) === "unsatisfiable") {
    return {
      applied: false,
      witnesses,
      reason: `witness route ${show(route)} ignored: the witnesses it admits (${witnesses.join(", ")}) cannot meet the contract's rule ${show(contract.rule)} on their own; every witness the contract admits is asked`
    }
  }
  return { applied: true, witnesses, reason: `witness route ${show(route)} applied: only ${witnesses.join(", ")} are asked and counted` }
}
