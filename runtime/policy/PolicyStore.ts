import { Context, type Effect } from "effect"
import type { LedgerError } from "../schema/LedgerError.js"
import type { Profile } from "../schema/Profile.js"
import type { AppliedBy } from "../schema/PolicyApplied.js"
import type { ActivePolicy } from "./ActivePolicy.js"

/**
 * The policy in force, shared by every kernel process through the `wk_policy` bucket
 * (runtime/ledger/NatsPolicyStore.ts; in memory: MemoryPolicyStore.ts).
 */
export class PolicyStore extends Context.Tag("wk/PolicyStore")<
  PolicyStore,
  {
    /** The policy this process holds now (kept current by a KV watch). */
    readonly current: Effect.Effect<ActivePolicy>
    /** Re-reads the bucket (before decisions that must see the latest epoch). */
    readonly refresh: Effect.Effect<ActivePolicy, LedgerError>
    /** Replaces the profiles and bumps the epoch (CAS on the bucket). */
    readonly apply: (profiles: ReadonlyArray<Profile>, appliedBy?: AppliedBy) => Effect.Effect<ActivePolicy, LedgerError>
    /**
     * As `apply`, for a signed envelope with a nonce: unless the same principal's nonce was already
     * applied (then nothing changes and `duplicate` names the epoch that apply made).
     */
    readonly applyOnce: (
      profiles: ReadonlyArray<Profile>,
      envelope: { readonly principal: string; readonly nonce: string; readonly expires_at: string },
      appliedBy?: AppliedBy
    ) => Effect.Effect<{ readonly policy: ActivePolicy; readonly duplicate?: number }, LedgerError>
  }
>() {}
