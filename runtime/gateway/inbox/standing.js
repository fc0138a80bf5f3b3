// The standing-approval panel's rules, pure: the scope "approve calls like this" offers for a
// call, bounding every argument (a number at most this call's, anything else equal to this
// call's value as canonical JSON, so an object or array is bounded whole), or the reason it is
// not offered; and the scope in words, every argument with its bound. `window.inboxStanding`.
;(function () {
  /** Longest canonical JSON of one bound value the panel offers (a person must be able to read it). */
  const MaxBoundChars = 1000

  /**
   * `{ scope }` for calls like `h` (its proposer, its tool, every argument bounded), or
   * `{ refused }` saying why no standing approval is offered. `jcs`: canonical JSON.
   */
  const offerFor = (h, jcs) => {
    const presentation = h.witness_request?.presentation ?? {}
    if ((presentation.disclosure ?? "exact") !== "exact") return { refused: "the arguments are redacted: a standing approval needs their exact values to bound them" }
    const args = h.args
    if (args === null || typeof args !== "object" || Array.isArray(args)) return { refused: "the call's arguments are not shown" }
    // The kernel bounds the call that runs: the values shown must be those.
    if (presentation.args === undefined || jcs(presentation.args) !== jcs(args)) return { refused: "the arguments shown are not the call's own: a grant would not bound what runs" }
    const bounds = {}
    for (const [name, value] of Object.entries(args)) {
      const text = jcs(value)
      if (text.length > MaxBoundChars) return { refused: "argument " + name + " is " + text.length + " characters of JSON: too long to read as a bound" }
      bounds[name] = typeof value === "number" ? { max: value } : { eq: value }
    }
    return { scope: { principals: [h.principal], tool: h.tool, args: bounds } }
  }

  /** One bound in words: `amount ≤ 1800`, `to = {"iban":"…","name":"dave"}`, `memo: any value`. */
  const boundWords = (name, b, jcs) => {
    const parts = []
    if (b.any === true) parts.push("any value")
    if (b.eq !== undefined) parts.push("= " + jcs(b.eq))
    if (b.in !== undefined) parts.push("one of " + b.in.map(jcs).join(", "))
    if (b.min !== undefined) parts.push("≥ " + b.min)
    if (b.max !== undefined) parts.push("≤ " + b.max)
    return name + (b.any === true ? ": " : " ") + parts.join(" and ")
  }

  /** A scope in words: whose calls, which tool, and every argument with its bound. */
  const scopeWords = (scope, jcs) => {
    const args = Object.entries(scope.args ?? {})
    return "covers " + scope.tool + " by " + scope.principals.join(", ") + (args.length === 0 ? " with no arguments" : " with " + args.map(([k, b]) => boundWords(k, b, jcs)).join(", "))
  }

  window.inboxStanding = { offerFor, scopeWords, boundWords, MaxBoundChars }
})()
