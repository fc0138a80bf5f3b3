// The batch panel's rules, pure: what a ticked call binds, and when a ticked call no longer is
// what was ticked. A batch item is bound to the generation, call, contract and presentation the
// person saw when ticking it; a call that changed since (the agent superseded it, an edit, a new
// contract or presentation) or left the open list drops out of the batch with the reason, and is
// never re-bound to what the list shows at the click. `window.inboxBatch`.
;(function () {
  const bindingFields = ["generation", "call_digest", "contract_digest", "presentation_digest"]

  /**
   * The item a tick binds: the call as listed then (`presentationDigest`: sha256 of the JCS of
   * the presentation shown), with the summary the person read, kept for the notice.
   */
  const itemOf = (h, presentationDigest, summary) => ({
    held_id: h.held_id,
    generation: h.generation,
    call_digest: h.call_digest,
    contract_digest: h.contract_digest,
    presentation_digest: presentationDigest,
    summary
  })

  /**
   * Why `latest` (the call as listed now, with `presentationDigest` of what it shows; undefined
   * when it left the open list) is not the call `item` was ticked on, or null when it still is.
   */
  const changeOf = (item, latest, presentationDigest) => {
    if (latest === undefined) return "it is no longer open"
    if (latest.execution !== undefined && latest.execution !== "none") return "it is already running"
    if (latest.generation !== item.generation) return "it changed since you ticked it (generation " + item.generation + " → " + latest.generation + ")"
    if (latest.call_digest !== item.call_digest) return "its call changed since you ticked it"
    if (latest.contract_digest !== item.contract_digest) return "its witness contract changed since you ticked it"
    if (presentationDigest !== item.presentation_digest) return "what it shows changed since you ticked it"
    return null
  }

  /**
   * The ticked items checked against the calls as listed now (`latestOf(held_id)` gives
   * `{ h, presentationDigest }` or undefined): those still bound as ticked, and those dropped
   * with the reason.
   */
  const reconcile = (items, latestOf) => {
    const kept = []
    const dropped = []
    for (const item of items) {
      const latest = latestOf(item.held_id)
      const why = changeOf(item, latest?.h, latest?.presentationDigest)
      if (why === null) kept.push(item)
      else dropped.push({ item, why })
    }
    return { kept, dropped }
  }

  /** The signed batch's items: exactly the ticked bindings, nothing read at the click. */
  const payloadItems = (items) => items.map((item) => Object.fromEntries([["held_id", item.held_id], ...bindingFields.map((k) => [k, item[k]])]))

  /** The notice a dropped item gets: which call and why it left the batch. */
  const noticeOf = (d) => "Removed from the batch: " + d.item.summary + " — " + d.why + ". Nothing was signed for it; open it to review it again."

  window.inboxBatch = { itemOf, changeOf, reconcile, payloadItems, noticeOf }
})()
