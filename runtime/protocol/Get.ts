import { Effect, Either } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { initialFacts } from "../heldcall/Facts.js"
import { heldView, roleOf, type Role } from "../heldcall/Views.js"
import { countingApprovals } from "../heldcall/Counting.js"
import { ruleProgress } from "../heldcall/WitnessRuleEval.js"
import { registryOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { Envelope } from "../schema/Envelope.js"
import { GetRequest } from "../schema/Requests.js"
import { notFound } from "./Replies.js"
import { readerOf } from "./ReadProof.js"
import { plainRequest, Rejected } from "./Request.js"

/** The role a signed reader reads `facts` in (null: not its business); a bad proof is a 401. */
const signedRole = (reader: Envelope, facts: HeldCallFacts) =>
  Effect.gen(function* () {
    const policy = yield* (yield* PolicyStore).current
    const proved = readerOf(reader, policy, Date.now())
    if (Either.isLeft(proved)) return yield* Effect.fail(new Rejected(proved.left))
    return roleOf(proved.right, facts)
  })

/**
 * `wk.v1.held.get`: a held call as its reader may see it (runtime/heldcall/Views.ts). Unsigned,
 * the witness-facing view (NATS permissions scope who may ask). With a signed `reader`, that
 * principal's own view: admin, proposer or eligible witness; any other call is a 404, exactly
 * as if it did not exist.
 */
export const get = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* plainRequest(data, GetRequest)
    const loaded = yield* (yield* HeldCallStore).load(req.held_id)
    const facts = loaded === null || loaded.facts.spec === null ? null : loaded.facts
    // A signed read is checked even for an unknown id, so a bad proof never learns what exists.
    const role: Role | null = req.reader === undefined ? "witness" : yield* signedRole(req.reader, facts ?? initialFacts(req.held_id))
    if (facts === null || role === null) return notFound(req.held_id)
    const policy = yield* (yield* PolicyStore).current
    return { status: 200, view: role, held: heldView(role, facts, progressOf(facts, policy, Date.now())) }
  })

/** Where the active rule stands with the approvals that count under the registry in force (absent without a rule). */
const progressOf = (f: HeldCallFacts, policy: ActivePolicy, now: number) =>
  f.active_rule === null
    ? undefined
    : ruleProgress(
        f.active_rule,
        countingApprovals(f, { ...registryOf(policy), now })
      )
