import { Effect, Either } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { heldView, roleOf } from "../heldcall/Views.js"
import { ReaderRequest } from "../schema/Requests.js"
import { progressOf } from "./Get.js"
import { readerFor } from "./ReadProof.js"
import { plainRequest } from "./Request.js"

/** Most open calls one listing reads. */
export const ListLimit = 500

/**
 * `wk.v1.held.list` `{reader}`: the open held calls the signed reader proposed or may witness, each
 * in the reader's view with `view`, oldest first. Cost before trust: the read is proved (bound to
 * `held.list`, its nonce good once; an unregistered key costs no signature check) before any call
 * is read, so a refused reader reads nothing. Reads at most `ListLimit` open calls.
 */
export const heldList = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* plainRequest(data, ReaderRequest)
    const proved = yield* readerFor(req.reader, { operation: "held.list" })
    if (Either.isLeft(proved)) return proved.left
    const reader = proved.right
    const ids = (yield* (yield* OpenIndex).list).slice(0, ListLimit)
    const store = yield* HeldCallStore
    const policy = yield* (yield* PolicyStore).current
    const now = Date.now()
    const loaded = yield* Effect.forEach(ids, (id) => store.load(id), { concurrency: 16 })
    const held = loaded
      .flatMap((l) => {
        const f = l?.facts
        if (f === undefined || f.spec === null || f.lifecycle !== "open") return []
        const role = roleOf(reader, f)
        return role === null ? [] : [{ ...heldView(role, f, progressOf(f, policy, now)), view: role }]
      })
      .sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)))
    return { status: 200, principal: reader.principal, held }
  })
