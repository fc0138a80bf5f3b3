import { Either } from "effect"
import { decodeWith } from "../schema/DecodeWith.js"
import { canonicalize, jcsDigest } from "../schema/Canonical.js"
import type { JsonObject } from "../schema/Json.js"
import { Profile } from "../schema/Profile.js"
import type { WitnessContract } from "../schema/WitnessContract.js"
import type { ActivePolicy } from "./ActivePolicy.js"
import type { Adjudication } from "./Adjudicator.js"
import { checkLayers, widens, type Widening } from "./Layers.js"

/**
 * The kernel's own tool: applying a profile as a governed call. An admin proposes it with
 * `args: {profile}`; the kernel floor decides it (below) and the kernel serves it
 * (runtime/policy/PolicyApplyTool.ts). The `kernel_` tool prefix is reserved for the kernel.
 */
export const PolicyApplyTool = "kernel_policy_apply"

/**
 * The call a `policy.apply` that widens becomes: the admin's signed request, recorded as the
 * proposal of `kernel_policy_apply` under a session, turn and call id derived from the envelope's
 * nonce, so the same signed request sent twice is the same held call, and applying a profile that
 * was applied before is a change of its own (an auditor re-derives the id from the signed
 * payload). A request without a nonce is identified by its profile.
 */
export const policyCall = (signed: { readonly profile?: unknown; readonly nonce?: unknown }) => ({
  session_id: "policy",
  turn_id: "apply",
  call_id: `policy-${(typeof signed.nonce === "string" ? jcsDigest({ nonce: signed.nonce }) : jcsDigest(signed.profile ?? null)).slice(0, 32)}`
})

/** The profile set after replacing (or adding) `profile` by name. */
export const withProfile = (profiles: ReadonlyArray<Profile>, profile: Profile): ReadonlyArray<Profile> => [...profiles.filter((x) => x.name !== profile.name), profile]

/** Whether the policy already holds exactly this profile (applying it again changes nothing). */
export const holdsProfile = (profiles: ReadonlyArray<Profile>, profile: Profile): boolean => {
  const same = profiles.find((x) => x.name === profile.name)
  return same !== undefined && canonicalize(same) === canonicalize(profile)
}

export type PolicyChange =
  | { readonly _tag: "Invalid"; readonly message: string; readonly field: string }
  | { readonly _tag: "Narrowing"; readonly profile: Profile; readonly profiles: ReadonlyArray<Profile> }
  | { readonly _tag: "Widening"; readonly profile: Profile; readonly profiles: ReadonlyArray<Profile>; readonly widenings: ReadonlyArray<Widening> }

/** Classifies a proposed profile against the current policy: invalid, narrowing, or widening. */
export const classifyChange = (policy: ActivePolicy, raw: unknown, path: string): PolicyChange => {
  const decoded = decodeWith(Profile, raw, path)
  if (Either.isLeft(decoded)) {
    const err = decoded.left["error"] as { message: string; path?: string }
    return { _tag: "Invalid", message: err.message, field: err.path ?? path }
  }
  const profile = decoded.right
  const profiles = withProfile(policy.profiles, profile)
  const layerError = checkLayers(profiles)[0]
  if (layerError !== undefined) return { _tag: "Invalid", message: layerError.message, field: `${path}.${layerError.field}` }
  const widenings = widens(policy.profiles, profiles)
  return widenings.length === 0 ? { _tag: "Narrowing", profile, profiles } : { _tag: "Widening", profile, profiles, widenings }
}

/** The witness contract a widening waits on: any other policy admin, by name. */
export const policyWitnesses = (policy: ActivePolicy, proposer: string): WitnessContract | undefined => {
  const others = [...policy.admins].filter((a) => a !== proposer).sort()
  if (others.length === 0) return undefined
  const rule = others.length === 1 ? { principal: others[0]! } : { any: others.map((principal) => ({ principal })) }
  return { rule, summary: "another policy admin approves a change that widens authority" }
}

/**
 * The kernel floor's decision for `kernel_policy_apply` (pure): only an admin may propose it;
 * a narrowing runs at once; a widening waits for another admin; an invalid profile is denied
 * naming the field. Plugins do not see this tool: policy must not decide its own widening.
 */
export const adjudicatePolicyChange = (policy: ActivePolicy, principal: string, args: JsonObject): Adjudication => {
  const executed = { tool: PolicyApplyTool, args }
  const deny = (reason: string): Adjudication => ({ verdict: "DENY", reasons: [{ by: "kernel", reason }], decisions: [{ by: "kernel:policy_change", output: "DENY" }], executed })
  if (!policy.admins.has(principal)) return deny(`principal '${principal}' is not a policy admin`)
  const change = classifyChange(policy, args["profile"], "args.profile")
  if (change._tag === "Invalid") return deny(change.message)
  if (change._tag === "Narrowing") return { verdict: "ALLOW", reasons: [{ by: "kernel", reason: "the profile only narrows policy" }], decisions: [{ by: "kernel:policy_change", output: "ALLOW" }], executed }
  const contract = policyWitnesses(policy, principal)
  if (contract === undefined) return deny(`the profile widens policy (${change.widenings[0]!.field}: ${change.widenings[0]!.message}) and no other policy admin can witness it`)
  const why = change.widenings.map((w) => `${w.field}: ${w.message}`).join("; ")
  return { verdict: "REQUIRE_WITNESS", reasons: [{ by: "kernel", reason: `the profile widens policy: ${why}` }], contract: { ...contract, summary: `${contract.summary}: ${why}` }, decisions: [{ by: "kernel:policy_change", output: "REQUIRE_WITNESS" }], executed }
}
