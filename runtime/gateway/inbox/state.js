// Where a held call stands for the person reading it: its title, the state line, the badge's
// outcome, what is still missing, who said no, what this viewer may still do, and when it
// expires. Pure functions over the `held.get` view and the viewer; `window.inboxState`.
;(function () {
  const W = window.inboxWords

  /** The tool the call runs, as presented. */
  const toolOf = (h) => h.witness_request?.presentation?.tool ?? h.tool

  /** Whether witnesses see this call redacted (values replaced by their types). */
  const redactedOf = (h) => h.witness_request?.presentation?.disclosure === "redacted"

  /**
   * The call's title: the kernel's summary of the call (its template, or the tool and its
   * arguments; only the tool when redacted). The witness contract's summary describes the rule,
   * not the call, and is never a title.
   */
  const titleOf = (h) => {
    const summary = h.witness_request?.presentation?.summary
    const ruleText = h.witness_request?.contract?.summary ?? h.witness_contract?.summary
    if (typeof summary === "string" && summary !== "" && summary !== ruleText) return summary
    return toolOf(h) + (redactedOf(h) ? " (arguments redacted)" : "")
  }

  /** This viewer's own decisions about the current generation that still stand. */
  const mineOf = (h, viewer) =>
    viewer === null ? [] : (h.evidence ?? []).filter((e) => e.witness === viewer.principal && e.status === "valid" && (e.decision === "approve" || e.decision === "reject" || e.decision === "revoke"))

  /** Witnesses whose no stands on the current generation. */
  const rejectersOf = (h) => [...new Set((h.evidence ?? []).filter((e) => e.status === "valid" && (e.decision === "reject" || e.decision === "revoke")).map((e) => e.witness))]

  /** The places of the rule nobody has filled yet, in words ("a person", "the fraud service"). */
  const missingOf = (h) => {
    const node = h.rule_progress
    if (node === undefined || node === null || node.met) return []
    const out = []
    const walk = (n) => {
      if (n.met) return
      if ("class" in n) out.push(W.classWords(n.class, Math.max(1, (n.count ?? 1) - (n.by ?? []).length)))
      else if ("principal" in n) out.push(n.principal)
      else if ("all" in n) n.all.forEach(walk)
      else if ("any" in n) {
        const parts = []
        const before = out.length
        n.any.forEach((p) => { walk(p); parts.push(out.splice(before).join(" and ")) })
        out.push(parts.filter((x) => x !== "").join(" or "))
      } else if ("quorum" in n) {
        const met = n.quorum.of.filter((p) => p.met).length
        out.push((n.quorum.n - met) + " more of " + n.quorum.of.length)
      }
    }
    walk(node)
    return out.filter((x) => x !== "")
  }

  /**
   * The badge's outcome, which its colour follows: open (waiting), approved (ready or running),
   * rejected (open, a witness said no), completed, failed, quarantined, denied, expired, cancelled.
   */
  const kindOf = (h) => {
    if (h.lifecycle !== "open") return W.outcomeOf(h)?.kind ?? h.lifecycle
    if (h.execution !== "none" || h.readiness === "satisfied") return "approved"
    if (rejectersOf(h).length > 0) return "rejected"
    return "open"
  }

  /**
   * Where the call stands for this viewer:
   * - `line`: the state line (badge), e.g. "open · rejected by user:carol · still needs a person";
   * - `kind`: the badge's outcome (kindOf);
   * - `mayDecide`: whether Approve/Reject are offered (an open call not yet approved or running,
   *   which this viewer has not already decided);
   * - `you`: what this viewer may still do, or why not, in a sentence.
   */
  const standingOf = (h, viewer) => {
    const kind = kindOf(h)
    const mine = mineOf(h, viewer)
    const my = mine.some((e) => e.decision === "reject") ? "reject" : mine.some((e) => e.decision === "revoke") ? "revoke" : mine.some((e) => e.decision === "approve") ? "approve" : null
    const rejecters = rejectersOf(h)
    const missing = missingOf(h)
    if (h.lifecycle !== "open") {
      const out = W.outcomeOf(h)
      const by = kind === "denied" && rejecters.length > 0 ? " · rejected by " + rejecters.join(", ") : ""
      const yours = my === "approve" ? "You approved it. " : my === "reject" ? "You rejected it. " : ""
      return { kind, line: kind + by, mayDecide: false, my, missing: [], rejecters, you: yours + "It has ended (" + (out?.title ?? h.lifecycle).toLowerCase() + "): there is nothing left to decide." }
    }
    const parts = ["open"]
    if (h.execution !== "none") parts.push("approved", h.execution)
    else if (h.readiness === "satisfied") parts.push("approved", "about to run")
    else {
      if (rejecters.length > 0) parts.push("rejected by " + rejecters.join(", "))
      if (h.readiness === "stale") parts.push("re-checking")
      else if (missing.length > 0) parts.push("still needs " + missing.join(" and "))
      else if (h.rule_progress === undefined) parts.push("waiting for witnesses")
    }
    const settled = h.execution !== "none" || h.readiness === "satisfied"
    const mayDecide = viewer !== null && my === null && !settled
    const you =
      viewer === null ? "Load your key (above) to decide." :
      my === "approve" ? (settled ? "You approved it; it runs now." : "You approved it" + (missing.length > 0 ? "; it still needs " + missing.join(" and ") + "." : ".")) :
      my === "reject" ? "You rejected it; your no stands for this call. You may still edit it or extend its expiry below." :
      my === "revoke" ? "You withdrew your approval; your no stands for this call." :
      settled ? "It is approved and runs: there is nothing left to decide." :
      "You may approve or reject it."
    return { kind, line: parts.join(" · "), mayDecide, my, missing, rejecters, you }
  }

  /** A clock time for people: "21:30", with the date when it is not today. */
  const clock = (iso, now) => {
    const d = new Date(iso)
    const t = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    return d.toDateString() === new Date(now).toDateString() ? t : d.toLocaleDateString() + " " + t
  }

  /**
   * The expiry in words, from the call's own `expires_at`, and what the contract's fallback does
   * when it comes first ("no decision by 21:10: denied"). Empty for an ended call.
   */
  const expiryOf = (h, now) => {
    if (h.lifecycle !== "open" || !h.expires_at) return ""
    const fb = h.witness_contract?.fallback
    const fallbackAt = fb && h.created_at ? Date.parse(h.created_at) + fb.after_ms : Infinity
    const expires = Date.parse(h.expires_at)
    if (fallbackAt < expires) {
      const what = fb.action === "deny" ? "it is denied" : "it goes to the fallback rule"
      return (fallbackAt > now ? "no decision in " + W.span(fallbackAt - now) : "no decision by now") + " (by " + clock(new Date(fallbackAt).toISOString(), now) + "): " + what + "; the call expires " + clock(h.expires_at, now)
    }
    return W.expiresIn(h.expires_at, now) + " (at " + clock(h.expires_at, now) + ")"
  }

  window.inboxState = { toolOf, titleOf, redactedOf, mineOf, rejectersOf, missingOf, kindOf, standingOf, expiryOf }
})()
