// What the inbox signs and how it tells a person what came of it: the payloads of an
// attestation, an edit, an extension and a standing approval about one call, the facts a
// confirmation restates, and one readable sentence for each reply. Pure; `window.inboxActions`.
;(function () {
  /** How long a statement signed here stays valid. */
  const ValidMs = 10 * 60_000

  /** The fields binding a statement to the call as shown: who signs, and the call's generation and digests. */
  const binding = (viewer, h) => ({ principal: viewer.principal, class: viewer.klass, held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest })

  /** Issued now, valid ValidMs, with a fresh nonce. */
  const stamps = (now, nonce) => ({ issued_at: new Date(now).toISOString(), expires_at: new Date(now + ValidMs).toISOString(), nonce })

  const withReason = (reason) => (reason === "" ? {} : { reason })

  /** An approval or reject of `h` as shown (its presentation by `presentationDigest`). */
  const attestPayload = (viewer, h, decision, reason, presentationDigest, now, nonce) =>
    ({ op: "attest", ...binding(viewer, h), decision, ...stamps(now, nonce), presentation_digest: presentationDigest, ...withReason(reason) })

  const editPayload = (viewer, h, args, reason, now, nonce) => ({ op: "edit", ...binding(viewer, h), args, ...withReason(reason), ...stamps(now, nonce) })

  const extendPayload = (viewer, h, byMs, reason, now, nonce) =>
    ({ op: "extend", ...binding(viewer, h), extend_to: new Date(Date.parse(h.expires_at) + byMs).toISOString(), ...withReason(reason), ...stamps(now, nonce) })

  /** The confirmation's facts: everything the signature binds, in the order a person reads them. */
  const confirmFacts = (payload, call) => [
    ["decision", `"${payload.decision}"`],
    ["signed as", payload.principal + " · class " + payload.class],
    ["call", call],
    ["reason", payload.reason ?? "(none)"],
    ["held_id", payload.held_id],
    ["generation", "generation " + payload.generation],
    ["call_digest", payload.call_digest],
    ["contract_digest", payload.contract_digest],
    ["presentation_digest", payload.presentation_digest],
    ["valid until", payload.expires_at]
  ]

  /**
   * One sentence for a reply to a signed request, and its disposition (`accepted`, `duplicate`,
   * `stale`, ..., or `error`). A key the gateway does not know gets the way to fix it.
   */
  const replyWords = (what, status, reply, viewer) => {
    const disposition = reply?.disposition ?? (status === 401 ? "unauthorized" : "error")
    if (status === 401) return { disposition, text: what + ": not accepted — the kernel does not know this key for " + (viewer?.principal ?? "this principal") + ". Load the key registered for it (Key, above)." }
    const said = reply?.disposition ?? reply?.error?.message ?? "HTTP " + status
    return { disposition, text: what + ": " + said + (reply?.reason ? " — " + reply.reason : "") }
  }

  window.inboxActions = { ValidMs, binding, stamps, attestPayload, editPayload, extendPayload, confirmFacts, replyWords }
})()
