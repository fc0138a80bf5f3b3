// Draws a held call into the page: list entries, and the detail pane's title, state line, what
// the viewer may do, rule, reasons, outcome, evidence and expiry. DOM only; what to say comes from
// state.js and words.js. `window.inboxRender`.
;(function () {
  const W = window.inboxWords
  const St = window.inboxState
  const $ = (id) => document.getElementById(id)
  const el = (tag, cls, text) => {
    const e = document.createElement(tag)
    if (cls) e.className = cls
    if (text !== undefined) e.textContent = text
    return e
  }

  /** One list entry's link: title, amount, tool, proposer, age, and its countdown or outcome chip. */
  const entryLink = (h, now) => {
    const a = el("a", "entry")
    a.href = "#/held/" + h.held_id
    const top = el("div", "entry-top")
    top.append(el("span", "entry-summary", St.titleOf(h)))
    const amount = W.amountOf(h)
    if (amount !== null) top.append(el("span", "amount", amount))
    const meta = el("div", "entry-meta")
    meta.append(el("span", "", St.toolOf(h) + " · from " + h.principal))
    meta.append(el("span", "", "held " + W.ago(h.created_at, now)))
    const kind = St.kindOf(h)
    if (h.lifecycle === "open") meta.append(el("span", "countdown", W.expiresIn(h.expires_at, now)))
    if (kind !== "open") meta.append(el("span", "chip " + kind, kind))
    a.append(top, meta)
    return a
  }

  const rule = (h) => {
    const p = $("rule-progress")
    const node = h.rule_progress ?? h.active_rule
    if (node === null || node === undefined) { p.replaceChildren(el("span", "", h.verdict === "REQUIRE_WITNESS" ? "no rule yet" : "no witness needed")); return }
    const met = h.rule_progress?.met === true
    const pieces = W.rulePieces(node, false)
    p.replaceChildren(el("span", "lead", met ? "met: " : "needs: "), ...pieces.map((x) => {
      const s = el("span", x.leaf ? (x.met ? "place met" : "place") : "", x.text)
      if (x.leaf) s.dataset.met = String(x.met)
      return s
    }))
    p.dataset.met = String(met)
    const veto = h.witness_contract?.veto ?? []
    if (veto.length > 0) p.append(el("span", "veto", " · one reject from " + veto.map((c) => W.classWords(c, 1)).join(" or ") + " ends it"))
    $("rule").textContent = JSON.stringify({ rule: h.active_rule, ...(veto.length ? { veto } : {}) }, null, 2)
  }

  const reasons = (h) => {
    const ul = $("reasons")
    const rs = h.lifecycle === "denied" ? [] : h.reasons ?? []
    ul.replaceChildren(...(rs.length ? rs : [{ reason: "the policy asks for a witness", by: "" }]).map((r) => {
      const li = el("li", "", r.reason)
      if (r.by) li.append(el("span", "muted", " — " + r.by))
      return li
    }))
  }

  const outcome = (h) => {
    const box = $("outcome")
    const out = W.outcomeOf(h)
    box.hidden = out === null
    if (out === null) { delete box.dataset.outcome; return }
    box.dataset.outcome = out.kind
    $("outcome-title").textContent = out.title + (h.continuation_delivery && h.continuation_delivery !== "none" ? " · " + h.continuation_delivery + " to the agent" : "")
    $("outcome-text").textContent = out.text
    const pre = $("outcome-result")
    pre.hidden = out.result === undefined || out.result === null
    pre.textContent = pre.hidden ? "" : JSON.stringify(out.result, null, 2)
  }

  /** The contract's evidence terms, and who supplied evidence for each so far (the kernel judges what it read). */
  const terms = (h) => {
    const ts = h.witness_contract?.evidence ?? []
    $("evidence-terms").replaceChildren(...ts.map((t) => {
      const by = t.by?.class !== undefined ? "class " + t.by.class : t.by?.principal ?? JSON.stringify(t.by)
      const from = (h.evidence ?? []).filter((e) => e.decision === "evidence" && e.status === "valid" && (e.class === t.by?.class || e.witness === t.by?.principal)).map((e) => e.witness)
      const li = el("li", "", "evidence " + t.name + " (" + t.kind + ") from " + by + ": " + (from.length > 0 ? "supplied by " + [...new Set(from)].join(", ") : "not yet"))
      li.dataset.term = t.name
      return li
    }))
  }

  const evidence = (h) => {
    const tbody = $("evidence").querySelector("tbody")
    tbody.replaceChildren(...(h.evidence ?? []).map((e) => {
      const tr = el("tr")
      tr.dataset.decision = e.decision
      for (const c of [e.witness, e.class, e.decision + (e.standing ? " (standing approval " + e.standing + ")" : ""), e.status + (e.reason ? " (" + e.reason + ")" : "")]) tr.append(el("td", "", c))
      return tr
    }))
    // A witness that withdrew its approval after the call ran: the effect stands.
    for (const r of h.revoked_after_release ?? []) {
      const tr = el("tr")
      tr.dataset.decision = "revoked-after-release"
      for (const c of [r.witness, r.class, "revoked after release", "the effect stands (" + r.issued_at + ")"]) tr.append(el("td", "", c))
      tbody.append(tr)
    }
    if ((h.evidence ?? []).length === 0) {
      const td = el("td", "muted", "no decisions yet")
      td.colSpan = 4
      const tr = el("tr")
      tr.append(td)
      tbody.append(tr)
    }
  }

  /** What is signed: the presentation as shown, and the digests a decision binds. */
  const shown = (h, viewer) => {
    const p = h.witness_request?.presentation ?? {}
    // Only the presentation is shown: with disclosure "redacted" the kernel has replaced the values.
    $("disclosure").textContent = "disclosure: " + (p.disclosure ?? "exact")
    $("presentation").textContent = JSON.stringify({ tool: p.tool, args: p.args, ...(p.summary ? { summary: p.summary } : {}), ...(p.proposed ? { proposed: p.proposed } : {}) }, null, 2)
    const dl = $("digests")
    dl.replaceChildren()
    for (const [k, v] of [["held_id", h.held_id], ["generation", h.generation], ["call_digest", h.call_digest], ["contract_digest", h.contract_digest], ["class", viewer?.klass ?? "—"]]) {
      const dd = el("dd", "", String(v))
      dd.id = "digest-" + k
      dl.append(el("dt", "", k), dd)
    }
  }

  /** The state line and badge, and the sentence saying what this viewer may still do; returns the standing (state.js). */
  const state = (h, viewer) => {
    const s = St.standingOf(h, viewer)
    $("state").textContent = s.line
    $("state").dataset.lifecycle = h.lifecycle
    $("state").dataset.kind = s.kind
    $("you").textContent = s.you
    $("you").dataset.my = s.my ?? "none"
    return s
  }

  const expiry = (h, now) => {
    const e = $("expiry")
    e.textContent = St.expiryOf(h, now)
    e.dataset.expiresAt = h.expires_at ?? ""
  }

  /** The whole detail pane for `h` as `viewer` reads it; returns its standing. */
  const detail = (h, viewer, now) => {
    document.body.classList.add("detail-open")
    $("detail-pane").hidden = false
    $("detail-title").textContent = St.titleOf(h)
    $("detail-meta").textContent = St.toolOf(h) + " proposed by " + h.principal + " · held " + W.ago(h.created_at, now) + " · " + h.held_id
    shown(h, viewer)
    reasons(h)
    rule(h)
    outcome(h)
    evidence(h)
    terms(h)
    expiry(h, now)
    const s = state(h, viewer)
    $("decide").hidden = h.lifecycle !== "open"
    $("decide-actions").hidden = !s.mayDecide
    $("approve").disabled = !s.mayDecide
    $("reject").disabled = !s.mayDecide
    return s
  }

  window.inboxRender = { el, entryLink, detail, expiry, state }
})()
