// The pure per-call checks, in report order; `plugin-rerun`, `projection` and `bearer-tokens` (async verification) run in Replay.
import { attestationBinding } from "./AttestationBinding.js"
import type { HeldCheck } from "./Check.js"
import { consistency } from "./Consistency.js"
import { delivery } from "./Delivery.js"
import { effectSafety } from "./EffectSafety.js"
import { policyAuthority } from "./PolicyAuthority.js"
import { policyRoute } from "./PolicyRoute.js"
import { signatures } from "./Signatures.js"
import { transformOutput } from "./TransformOutput.js"

export * from "./Check.js"
export { attestationBinding } from "./AttestationBinding.js"
export { consistency } from "./Consistency.js"
export { delivery } from "./Delivery.js"
export { effectSafety } from "./EffectSafety.js"
export { policyAuthority } from "./PolicyAuthority.js"
export { policyRoute } from "./PolicyRoute.js"
export { signatures } from "./Signatures.js"
export { transformOutput } from "./TransformOutput.js"
export { commitChain, type ChainLink, type ChainFinding } from "./CommitChain.js"
export { compareProjection, type ProjectionComparison } from "./Projection.js"
export { rerunPlugins } from "./PluginRerun.js"
export { bearerTokenCheck, behalfProposalsOf, type BehalfProposal } from "./BearerTokens.js"
export { appliedUsesOf, standingCheck, type AppliedUse, type GrantMessage } from "./StandingUses.js"

/** Every pure held-call check. */
export const heldChecks: ReadonlyArray<HeldCheck> = [signatures, transformOutput, attestationBinding, effectSafety, consistency, policyAuthority, policyRoute, delivery]
