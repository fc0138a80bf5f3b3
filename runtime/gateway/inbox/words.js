// How the inbox puts a held call into words: the witness rule with its progress, times, amounts
// and the outcome of an ended call. Pure functions over the `held.get` view; `window.inboxWords`.
;(function () {
  /** What a witness class is called in a sentence (one, several); unknown classes read "a <class> witness". */
  const classNames = {
    human: ["a person", "people"],
    fraud: ["the fraud service", "fraud services"],
    breakglass: ["a break-glass operator", "break-glass operators"],
    compliance: ["compliance", "compliance officers"],
    ci: ["CI", "CI runs"],
    admin: ["an admin", "admins"],
    oncall: ["the on-call engineer", "on-call engineers"]
  }
  const classWords = (klass, count) => {
    const known = classNames[klass]
    if (count > 1) return count + " " + (known ? known[1] : klass + " witnesses")
    return known ? known[0] : "a " + klass + " witness"
  }

  /** A number with thousands separators, as the kernel's summaries write it. */
  const grouped = (n) => {
    const [int, frac] = String(Math.abs(n)).split(".")
    if (int.includes("e")) return String(n)
    return (n < 0 ? "-" : "") + int.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (frac !== undefined ? "." + frac : "")
  }

  /**
   * The rule's progress as pieces of a sentence: `{text}` for joining words, `{text, met}` for a
   * place to fill (✓ once filled, … while waiting). Built from `rule_progress` when the kernel
   * sent it, else from the bare rule with nothing filled.
   */
  const rulePieces = (node, nested) => {
    const out = []
    const push = (t) => out.push({ text: t })
    const join = (parts, word, wrap) => {
      if (wrap && parts.length > 1) push("(")
      parts.forEach((p, i) => {
        if (i > 0) push(i === parts.length - 1 || word === "and" ? " " + word + " " : ", ")
        out.push(...rulePieces(p, true))
      })
      if (wrap && parts.length > 1) push(")")
    }
    if ("class" in node) {
      const count = node.count ?? 1
      const by = node.by ?? []
      const who = by.length > 0 ? " (" + (count > 1 && !node.met ? by.length + " of " + count + ": " : "") + by.join(", ") + ")" : ""
      out.push({ text: classWords(node.class, count) + (node.met ? " ✓" : " …") + who, met: node.met === true, leaf: true })
    } else if ("principal" in node) {
      out.push({ text: node.principal + (node.met ? " ✓" : " …"), met: node.met === true, leaf: true })
    } else if ("all" in node) join(node.all, "and", nested)
    else if ("any" in node) {
      if (!nested && node.any.length > 1) push("either ")
      join(node.any, "or", nested)
    } else if ("quorum" in node) {
      push(node.quorum.n + " of (")
      node.quorum.of.forEach((p, i) => {
        if (i > 0) push(", ")
        out.push(...rulePieces(p, true))
      })
      push(")")
    }
    return out
  }

  /** "3 min", "2 h 5 min", "45 s": a span of time for people. */
  const span = (ms) => {
    const s = Math.max(0, Math.round(ms / 1000))
    if (s < 60) return s + " s"
    const m = Math.floor(s / 60)
    if (m < 60) return m + " min" + (m < 10 && s % 60 ? " " + (s % 60) + " s" : "")
    const h = Math.floor(m / 60)
    if (h < 48) return h + " h" + (m % 60 ? " " + (m % 60) + " min" : "")
    return Math.floor(h / 24) + " days"
  }
  const ago = (iso, now) => (iso ? span(now - Date.parse(iso)) + " ago" : "")
  const expiresIn = (iso, now) => {
    if (!iso) return ""
    const left = Date.parse(iso) - now
    return left > 0 ? "expires in " + span(left) : "past its expiry"
  }

  /**
   * How an ended call ended, for people: `kind` is completed, failed, quarantined, denied,
   * cancelled or expired. A tool that reported failure is a failure, whatever the lifecycle says.
   */
  const outcomeOf = (h) => {
    const reasons = (h.reasons ?? []).map((r) => r.reason + (r.by ? " (" + r.by + ")" : "")).join("; ")
    switch (h.lifecycle) {
      case "completed":
        if (h.outcome === "failed" || h.tool_ok === false) return { kind: "failed", title: "Failed: the tool refused", text: h.tool_error ?? "the tool reported a failure" }
        if (h.result_admission === "quarantined") return { kind: "quarantined", title: "Ran; result quarantined", text: h.quarantine?.reason ?? "the result was withheld" }
        return { kind: "completed", title: "Completed", text: "the tool ran and reported success", result: h.result }
      case "denied":
        return { kind: "denied", title: "Denied", text: reasons || "denied" }
      case "cancelled":
        return { kind: "cancelled", title: "Cancelled", text: "the agent or its session cancelled the call" }
      case "expired":
        return { kind: "expired", title: "Expired", text: "no satisfying decision arrived before " + (h.expires_at ?? "its expiry") }
      default:
        return null
    }
  }

  /** The amount of a call when its arguments carry one (the list shows it beside the summary). */
  const amountOf = (h) => {
    const a = h.witness_request?.presentation?.args?.amount ?? h.args?.amount
    return typeof a === "number" ? grouped(a) : null
  }

  window.inboxWords = { classWords, grouped, rulePieces, span, ago, expiresIn, outcomeOf, amountOf }
})()
