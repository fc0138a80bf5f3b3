import { choosePolicyRoute } from "../../heldcall/PolicyRoute.js"
import { registryOf } from "../../policy/ActivePolicy.js"
import { effectivePreferences } from "../../policy/Preferences.js"
import { collector, type HeldCheck } from "./Check.js"

const RouteReason = /^witness route .* (applied|ignored):/

/**
 * `policy-route`: every policy hold a user's `witness_route` narrowed, or that recorded the route
 * as ignored, is re-derived: the preferences in force for the proposer (the layers of the epoch
 * the call was decided under and its own) name that route, the kernel's pure rule
 * (heldcall/PolicyRoute.ts) gives the same choice and reason under that epoch's registry, and the
 * contract carries the route exactly when the choice applied it. A route that could leave the
 * contract unmet, or that admits a witness the contract does not, is never on a policy hold.
 */
export const policyRoute: HeldCheck = {
  name: "policy-route",
  run: (call, ctx) => {
    const c = collector("policy-route", call.heldId)
    for (const { seq, event, before } of call.steps) {
      if (event.type !== "call.adjudicated" || event.verdict !== "REQUIRE_WITNESS") continue
      const recorded = event.reasons.find((r) => r.by === "preferences" && RouteReason.test(r.reason))
      if (recorded === undefined) continue
      c.count()
      const policy = ctx.policy.byEpoch(event.policy_epoch)?.policy
      const spec = before.spec
      if (policy === undefined || spec === null || event.witness_contract === undefined) {
        c.unsure([seq], `the policy epoch ${event.policy_epoch} or the call's proposal is not in the log read; the route choice is not re-derived`)
        continue
      }
      const route = effectivePreferences(policy, spec.principal, spec.preferences).witness_route
      if (route === undefined) {
        c.fail([seq], "a witness route choice is recorded, but no preference in force names a witness route")
        continue
      }
      const { route: carried, ...contract } = event.witness_contract
      const choice = choosePolicyRoute(contract, route, registryOf(policy), spec)
      if (choice.reason !== recorded.reason) c.fail([seq], `the recorded route choice is not the kernel's rule under epoch ${event.policy_epoch}: recorded '${recorded.reason}', re-derived '${choice.reason}'`)
      if (choice.applied !== (carried !== undefined)) c.fail([seq], choice.applied ? "the route applies but the contract does not carry it" : "the contract carries a route the kernel's rule ignores")
    }
    return c.done()
  }
}
