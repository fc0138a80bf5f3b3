// The approval inbox's wiring: lists the held calls this witness may decide, opens one, follows
// it live, and signs reads and decisions in the browser with a non-extractable key (keys.js)
// after a confirmation that restates what is signed. What a call's state is comes from state.js,
// how it is drawn from render.js, what is signed from actions.js. Routes: `#/` the list,
// `#/held/<id>` a call.
;(function () {
  const $ = (id) => document.getElementById(id)
  const { b64 } = inboxKeys
  const W = inboxWords
  const B = inboxBatch
  const S = inboxStanding
  const St = inboxState
  const R = inboxRender
  const A = inboxActions
  let identity = null
  let selected = null
  let follow = null
  let events = []
  let current = null
  let pending = null
  /** shownKey of the call as the pending confirmation restated it. */
  let pendingShown = null
  /** Open calls as last listed, and ended calls read once (an ended call does not change what it was). */
  let openCalls = []
  /** sha256 of the JCS of each open call's presentation as last listed: what a tick binds. */
  let shownDigests = new Map()
  const ended = new Map()
  // Ids of calls this browser has listed or opened: the gateway indexes only open calls, so the
  // "ended" filter re-reads these. Ids are not secret.
  const SeenKey = "wk.inbox.seen"
  const MaxSeen = 100
  const seen = () => {
    try { return JSON.parse(localStorage.getItem(SeenKey) ?? "[]").filter((x) => typeof x === "string") } catch { return [] }
  }
  const remember = (ids) => {
    const all = [...new Set([...ids, ...seen()])].slice(0, MaxSeen)
    localStorage.setItem(SeenKey, JSON.stringify(all))
  }

  const el = R.el

  const showIdentity = () => {
    $("principal").value = identity.principal
    $("klass").value = identity.klass
    $("identity-status").textContent = "signing as " + identity.principal + " (" + identity.klass + ", key " + identity.publicKey.slice(0, 8) + "…)"
    $("public-key").textContent = identity.publicKey
  }

  const loadIdentity = async () => {
    // localStorage holds no secret: an entry with a raw key in it is removed, not read.
    localStorage.removeItem("wk.identity")
    identity = await inboxKeys.load()
    $("first-use").hidden = identity !== null
    if (identity !== null) showIdentity()
    else $("identity-box").open = true
  }

  /** Says what went wrong with a key, where the person is looking (the key form), as an alert. */
  const keyError = (text) => {
    const e = $("key-error")
    e.textContent = text
    e.hidden = text === ""
  }

  /**
   * Keeps a key for this browser. An imported key is first tried on a signed read: a key the
   * kernel does not know for the principal is refused here, with the way to get the right one.
   * A generated key is new by nature: it is kept, and its public key shown for registration.
   */
  const useKey = async (makeKey, check) => {
    keyError("")
    try {
      const who = { principal: $("principal").value.trim(), klass: $("klass").value.trim() }
      if (who.principal === "") throw new Error("give the principal first (e.g. user:carol)")
      if (who.klass === "") throw new Error("give the class you decide as (e.g. human)")
      const key = await makeKey()
      if (check) {
        const r = await signedGet("/kernels", {}, { ...who, ...key })
        if (r.status === 401) throw new Error("the kernel does not know this key for " + who.principal + ": " + inboxKeys.KeyHint)
        if (r.status !== 200) throw new Error("the gateway could not check the key (HTTP " + r.status + "); try again")
      }
      await inboxKeys.save(who, key)
      $("secret").value = ""
      await loadIdentity()
      ended.clear()
      refreshList()
      refreshHealth()
      route()
    } catch (e) {
      keyError("Key not loaded: " + (e instanceof Error ? e.message : String(e)))
      $("secret").focus()
    }
  }
  $("identity").addEventListener("submit", (ev) => {
    ev.preventDefault()
    const secret = $("secret").value
    // No secret given: keep the stored key, change who it signs as.
    if (secret.trim() === "" && identity !== null) return useKey(async () => identity, true)
    return useKey(() => inboxKeys.importSecret(secret), true)
  })
  $("generate-key").addEventListener("click", () => useKey(inboxKeys.generate, false))

  /** A signed envelope of `payload` as `who` (this witness unless given; JCS bytes, Ed25519). */
  const signedEnvelope = async (payload, who = identity) => ({ payload, key: who.publicKey, sig: await inboxKeys.sign(who, jcs(payload)) })

  const nonce = () => b64.enc(crypto.getRandomValues(new Uint8Array(12))).replace(/[^A-Za-z0-9]/g, "x")

  /** Lowercase hex sha256 of a string's UTF-8 bytes (the attestation binds the presentation shown by this digest of its JCS). */
  const sha256Hex = async (text) =>
    Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))), (b) => b.toString(16).padStart(2, "0")).join("")

  /** The gateway authenticates every read: `Authorization: WK-Read` over method, path, time and a fresh nonce. */
  const readHeaders = async (path, who) => {
    const env = await signedEnvelope({ op: "read", principal: who.principal, method: "GET", path, issued_at: new Date().toISOString(), nonce: nonce() }, who)
    return { authorization: "WK-Read " + btoa(JSON.stringify(env)) }
  }
  const signedGet = async (path, init = {}, who = identity) => fetch(path, { ...init, headers: await readHeaders(path, who) })

  /** A reply's JSON, or an error body naming what came back when it is not JSON (a proxy's page, a cut connection). */
  const replyOf = async (r) => r.json().catch(() => ({ error: { message: "the gateway answered HTTP " + r.status + " without a reply" } }))

  const summaryOf = St.titleOf
  const toolOf = St.toolOf

  // ---- the list --------------------------------------------------------------------------

  /** Ended calls this browser saw: read once each (at most 20 per refresh), kept in memory. */
  const readEnded = async (openIds) => {
    const todo = seen().filter((id) => !openIds.has(id) && !ended.has(id)).slice(0, 20)
    for (const id of todo) {
      const r = await signedGet("/held/" + id)
      if (r.status !== 200) { ended.set(id, null); continue }
      const body = await replyOf(r)
      // Still open but off the index for a moment: read it again next time.
      if (body.held.lifecycle !== "open") ended.set(id, { ...body.held, view: body.view })
    }
  }

  const refreshList = async () => {
    if (identity === null) return
    let r, body
    try {
      r = await signedGet("/held")
      body = await replyOf(r)
    } catch (e) {
      return listError("The gateway is not answering (" + e.message + "); retrying.")
    }
    if (r.status === 401) return listError("The kernel does not know the key this browser signs with for " + identity.principal + ". Load the key registered for it (Key, above): " + inboxKeys.KeyHint + ".")
    if (r.status !== 200) return listError("The list could not be read: " + (body.error?.message ?? "HTTP " + r.status))
    listError("")
    // The listing also holds this principal's own proposals; the inbox shows what it may witness.
    const listed = (body.held || []).filter((h) => h.view === "witness")
    const digests = new Map(await Promise.all(listed.map(async (h) => [h.held_id, await sha256Hex(jcs(h.witness_request?.presentation ?? {}))])))
    openCalls = listed
    shownDigests = digests
    remember(openCalls.map((h) => h.held_id))
    const state = $("filter-state").value
    if (state !== "open") await readEnded(new Set(openCalls.map((h) => h.held_id)))
    drawList()
  }

  /** An error reading the list, said in the list pane as an alert (empty: none). */
  const listError = (text) => {
    const e = $("list-error")
    if (e.textContent !== text) e.textContent = text
    e.hidden = text === ""
  }

  // ---- kernel health -----------------------------------------------------------------------

  /** How long ago an ISO time was, in words a glance reads ("12 s ago", "3 min ago"). */
  const ago = (iso) => {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000))
    return s < 120 ? s + " s ago" : Math.round(s / 60) + " min ago"
  }

  /** The header line: kernels answering, their versions, the controllers' lag and the last recovery. */
  const refreshHealth = async () => {
    if (identity === null) return
    const line = $("kernel-health")
    try {
      const r = await signedGet("/kernels")
      const body = await replyOf(r)
      if (r.status !== 200) throw new Error(body.error?.message ?? String(r.status))
      const kernels = body.kernels || []
      const versions = [...new Set(kernels.map((k) => k.version))].join(", ")
      const lag = Math.max(0, ...kernels.map((k) => k.controller_lag ?? 0))
      const recovered = kernels.map((k) => k.last_recovery_at).filter((t) => t !== null).sort().pop()
      line.textContent = kernels.length === 0
        ? "kernels: none answering"
        : "kernels: " + kernels.length + " up (" + versions + ") · lag " + lag + " · last recovery " + (recovered === undefined ? "none yet" : ago(recovered))
      line.dataset.state = kernels.length === 0 ? "down" : "up"
    } catch (e) {
      line.textContent = "kernels: unreachable (" + e.message + ")"
      line.dataset.state = "down"
    }
  }

  const drawList = () => {
    const state = $("filter-state").value
    const tool = $("filter-tool").value
    const endedCalls = [...ended.values()].filter((h) => h !== null && h.view === "witness")
    const all = [...openCalls, ...endedCalls]
    // The tool filter offers every tool in view.
    const tools = [...new Set(all.map(toolOf))].sort()
    const sel = $("filter-tool")
    const have = [...sel.options].map((o) => o.value).filter((v) => v !== "")
    if (tools.join("\u0000") !== have.join("\u0000")) {
      sel.replaceChildren(el("option", "", "every tool"), ...tools.map((t) => { const o = el("option", "", t); o.value = t; return o }))
      sel.options[0].value = ""
      sel.value = tools.includes(tool) ? tool : ""
    }
    const shown = (state === "open" ? openCalls : state === "ended" ? endedCalls : all)
      .filter((h) => sel.value === "" || toolOf(h) === sel.value)
      .sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)))
    const list = $("held-list")
    const now = Date.now()
    list.replaceChildren(
      ...shown.map((h) => {
        const li = el("li")
        li.dataset.heldId = h.held_id
        li.dataset.lifecycle = h.lifecycle
        li.dataset.kind = St.kindOf(h)
        if (selected === h.held_id) li.classList.add("selected")
        li.append(R.entryLink(h, now))
        const amount = W.amountOf(h)
        if (h.lifecycle === "open" && h.execution === "none") {
          const pick = el("input", "pick")
          pick.type = "checkbox"
          pick.title = "select for a batch approval"
          pick.setAttribute("aria-label", "select " + summaryOf(h))
          pick.checked = picked.has(h.held_id)
          // The tick binds the call as drawn here, digests included; the click signs exactly that.
          const item = B.itemOf(h, shownDigests.get(h.held_id), summaryOf(h) + (amount !== null ? " (" + amount + ")" : ""))
          pick.addEventListener("change", () => {
            if (pick.checked) picked.set(h.held_id, item)
            else picked.delete(h.held_id)
            delete $("batch-approve").dataset.armed
            drawBatchBar()
          })
          li.append(pick)
        }
        return li
      })
    )
    $("list-count").textContent = "(" + shown.length + ")"
    $("list-empty").hidden = shown.length > 0
    recheckBatch()
    drawBatchBar()
  }

  // ---- batch approval: one signed attestation for the selected calls ----------------------

  /** Ticked calls: held_id -> the binding of the call as it was shown when ticked (batch.js). */
  const picked = new Map()
  /**
   * Drops every ticked call that is no longer what was ticked (superseded, edited, ended), with a
   * visible notice, and disarms the batch: what the armed button said it would sign has changed.
   * True when nothing was dropped.
   */
  const recheckBatch = () => {
    const { dropped } = B.reconcile([...picked.values()], (id) => {
      const h = openCalls.find((x) => x.held_id === id)
      return h === undefined ? undefined : { h, presentationDigest: shownDigests.get(id) }
    })
    if (dropped.length === 0) return true
    for (const d of dropped) picked.delete(d.item.held_id)
    for (const box of document.querySelectorAll("#held-list input.pick")) box.checked = picked.has(box.closest("li").dataset.heldId)
    delete $("batch-approve").dataset.armed
    const notice = $("batch-notice")
    notice.append(...dropped.map((d) => {
      const li = el("li", "", B.noticeOf(d))
      li.dataset.heldId = d.item.held_id
      return li
    }))
    notice.hidden = false
    return false
  }
  const drawBatchBar = () => {
    const bar = $("batch-bar")
    bar.hidden = picked.size === 0 && $("batch-count").dataset.result === undefined
    const button = $("batch-approve")
    button.hidden = picked.size === 0
    button.textContent = button.dataset.armed === "1" ? "Sign approval of " + picked.size + " call(s) as " + (identity?.principal ?? "?") : "Approve selected…"
    if ($("batch-count").dataset.result === undefined) $("batch-count").textContent = picked.size + " selected"
  }
  $("batch-approve").addEventListener("click", async () => {
    const button = $("batch-approve")
    delete $("batch-count").dataset.result
    // A ticked call that changed since it was ticked leaves the batch (with its notice) before anything is armed or signed.
    if (!recheckBatch()) return drawBatchBar()
    // The first click says what will be signed; the second signs it.
    if (button.dataset.armed !== "1") { button.dataset.armed = "1"; return drawBatchBar() }
    delete button.dataset.armed
    const items = [...picked.values()]
    if (identity === null || items.length === 0) return drawBatchBar()
    const now = Date.now()
    const payload = {
      op: "attest_batch", principal: identity.principal, class: identity.klass, decision: "approve", mode: "each",
      items: B.payloadItems(items),
      issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: nonce()
    }
    const r = await fetch("/attestations/batch", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(await signedEnvelope(payload)) })
    const reply = await replyOf(r)
    const results = reply.results ?? []
    const accepted = results.filter((x) => x.status < 300).length
    const count = $("batch-count")
    count.dataset.result = reply.disposition ?? "error"
    count.textContent = reply.disposition === "recorded" ? "batch: " + accepted + " accepted, " + (results.length - accepted) + " not" : "batch: " + (reply.reason ?? reply.error?.message ?? r.status)
    picked.clear()
    drawBatchBar()
    refreshList()
  })
  $("batch-clear").addEventListener("click", () => {
    picked.clear()
    $("batch-notice").replaceChildren()
    $("batch-notice").hidden = true
    delete $("batch-approve").dataset.armed
    delete $("batch-count").dataset.result
    drawList()
  })
  $("filter-state").addEventListener("change", () => refreshList())
  $("filter-tool").addEventListener("change", drawList)

  // ---- one call --------------------------------------------------------------------------

  const drawExpiry = () => {
    if (current !== null) R.expiry(current, Date.now())
    for (const c of document.querySelectorAll("#held-list .countdown")) {
      const h = openCalls.find((x) => x.held_id === c.closest("li").dataset.heldId)
      if (h) c.textContent = W.expiresIn(h.expires_at, Date.now())
    }
  }

  /** What a decision about `h` binds: its generation, digests and the presentation shown. */
  const shownKey = (h) => [h.held_id, h.generation, h.call_digest, h.contract_digest, jcs(h.witness_request?.presentation ?? {})].join("\u0000")

  /**
   * The open call changed under the person's eyes (the agent superseded it, an edit, a new
   * contract): a confirmation being read is withdrawn unsigned, and the pane says so.
   */
  const noticeChange = (before, h) => {
    const notice = $("changed-notice")
    notice.textContent = "This call changed while it was open (generation " + before.generation + " → " + h.generation + "): what you see now is the new call. Read it again before you decide."
    notice.hidden = false
    if (pending !== null && pending.held_id === h.held_id) {
      const d = pending.decision
      hideConfirm()
      $("attest-status").textContent = d + ": not signed — the call changed while you were confirming; read it again"
      $("attest-status").dataset.disposition = "superseded"
    }
  }

  const render = (h) => {
    if (current !== null && current.held_id === h.held_id && shownKey(current) !== shownKey(h)) noticeChange(current, h)
    const standing = R.detail(h, identity, Date.now())
    // A confirmation open for a call this viewer may no longer decide is withdrawn unsigned.
    if (!standing.mayDecide && pending !== null) hideConfirm()
    const canSign = identity !== null && h.lifecycle === "open" && h.execution === "none"
    drawMore(h, canSign)
    selected = h.held_id
    current = h
    if (h.lifecycle !== "open") ended.set(h.held_id, { ...h, view: "witness" })
    document.querySelectorAll("#held-list li").forEach((li) => li.classList.toggle("selected", li.dataset.heldId === h.held_id))
  }

  /** The call (`shownKey`) the edit box was filled from, and the text it was given. */
  let editBase = null
  /** The standing approval's scope as drawn, with the call it was drawn for: what "Sign" signs. */
  let drawnOffer = null
  const exactOf = (h) => (h.witness_request?.presentation?.disclosure ?? "exact") === "exact"
  const fillEdit = (h) => {
    const text = exactOf(h) ? JSON.stringify(h.witness_request?.presentation?.args ?? {}, null, 2) : ""
    $("edit-args").value = text
    editBase = { key: shownKey(h), heldId: h.held_id, generation: h.generation, text }
  }

  const drawMore = (h, canSign) => {
    $("more").hidden = h.lifecycle !== "open"
    const exact = exactOf(h)
    // The box follows the call while untouched; what the witness is typing stays, bound to the
    // call it was started from ("Sign edit" refuses it once that call changed).
    if (editBase === null || editBase.heldId !== h.held_id || (editBase.key !== shownKey(h) && $("edit-args").value === editBase.text)) fillEdit(h)
    $("edit-args").disabled = !canSign || !exact
    $("edit-sign").disabled = !canSign || !exact
    $("extend-sign").disabled = !canSign
    // Every argument bounded, or no offer and the reason (standing.js).
    const offer = S.offerFor(h, jcs)
    drawnOffer = { key: shownKey(h), offer }
    $("standing-sign").disabled = !canSign || offer.scope === undefined
    $("standing-scope").textContent = offer.scope !== undefined ? S.scopeWords(offer.scope, jcs) : "not offered: " + offer.refused
    $("standing-scope").dataset.offered = String(offer.scope !== undefined)
  }

  /** Posts a signed witness request about the current call and says what the kernel answered. */
  const sendSigned = async (what, path, payload, describe) => {
    const r = await postSigned(path, payload)
    const said = A.replyWords(what, r.status, r.reply, identity)
    setStatus(said.text + (r.status < 300 && describe ? " — " + describe(r.reply) : ""), said.disposition)
    if (current !== null) void refreshFacts(current.held_id)
    return r.reply
  }
  /** Posts `payload` signed as this witness; a gateway that does not answer is a reply too (status 0). */
  const postSigned = async (path, payload) => {
    try {
      const r = await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(await signedEnvelope(payload)) })
      return { status: r.status, reply: await replyOf(r) }
    } catch (e) {
      return { status: 0, reply: { error: { message: "the gateway is not answering (" + e.message + "); nothing was recorded" } } }
    }
  }
  /** The status line under the decision: what came of the last thing signed here. */
  const setStatus = (text, disposition) => {
    const status = $("attest-status")
    status.textContent = text
    if (disposition === undefined) delete status.dataset.disposition
    else status.dataset.disposition = disposition
  }
  const reasonText = () => $("decision-reason").value.trim()

  $("edit-sign").addEventListener("click", async () => {
    if (identity === null || current === null) return
    let args
    try {
      args = JSON.parse($("edit-args").value)
      if (args === null || typeof args !== "object" || Array.isArray(args)) throw new Error("the arguments must be a JSON object")
    } catch (e) {
      $("attest-status").textContent = "edit: not signed — " + e.message
      $("attest-status").dataset.disposition = "not-signed"
      return
    }
    if (editBase === null || editBase.key !== shownKey(current)) {
      const from = editBase?.generation
      fillEdit(current)
      $("attest-status").textContent = "edit: not signed — the call changed since this edit began (generation " + from + " → " + current.generation + "); the box now holds the new call's arguments"
      $("attest-status").dataset.disposition = "superseded"
      return
    }
    // What is signed becomes the box's own text: the edited call that follows refills it.
    editBase = { ...editBase, text: $("edit-args").value }
    await sendSigned("edit", "/held/" + current.held_id + "/edits", A.editPayload(identity, current, args, reasonText(), Date.now(), nonce()), (r) => "now generation " + r.generation + ", waiting for an approval of the edited call")
  })

  $("extend-sign").addEventListener("click", async () => {
    if (identity === null || current === null) return
    await sendSigned("extension", "/held/" + current.held_id + "/extensions", A.extendPayload(identity, current, Number($("extend-by").value), reasonText(), Date.now(), nonce()), (r) => "expires " + new Date(r.expires_at).toLocaleString())
  })

  $("standing-sign").addEventListener("click", async () => {
    if (identity === null || current === null) return
    // Signs the scope as drawn, for the call it was drawn for.
    if (drawnOffer === null || drawnOffer.key !== shownKey(current) || drawnOffer.offer.scope === undefined) return
    const offer = drawnOffer.offer
    const now = Date.now()
    const payload = {
      op: "standing.grant", principal: identity.principal, class: identity.klass, grant_id: "inbox-" + nonce(),
      scope: offer.scope, max_uses: Math.max(1, Math.min(1000, Number($("standing-uses").value) || 1)),
      issued_at: new Date(now).toISOString(), expires_at: new Date(now + Number($("standing-hours").value) * 3_600_000).toISOString(), nonce: nonce(), ...(reasonText() === "" ? {} : { reason: reasonText() })
    }
    await sendSigned("standing approval", "/standing", payload, (r) => r.grant_id + ": up to " + r.max_uses + " later call(s) until " + new Date(r.expires_at).toLocaleString() + " (approve this one above)")
  })

  /** Re-reads the selected call's facts (after each event of its stream). */
  const refreshFacts = async (heldId) => {
    const r = await signedGet("/held/" + heldId)
    if (r.status !== 200) return
    const body = await replyOf(r)
    if (body.held.held_id === selected) render(body.held)
  }

  /**
   * Follows a call's server-sent events with a signed request (EventSource cannot send headers):
   * each `held-event` is drawn, then the facts are re-read. Returns a stop function.
   */
  const followEvents = (heldId) => {
    const ac = new AbortController()
    void (async () => {
      const r = await signedGet("/held/" + heldId + "/events", { signal: ac.signal })
      if (r.status !== 200 || r.body === null) return
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ""
      let facts = Promise.resolve()
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return
        buffer += value
        let end
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const type = /^event: (.*)$/m.exec(block)?.[1]
          const data = /^data: (.*)$/m.exec(block)?.[1]
          if (type !== "held-event" || data === undefined) continue
          const e = JSON.parse(data)
          if (events.some((x) => x.seq === e.seq && x.index === e.index)) continue
          events.push(e)
          drawEvents()
          facts = facts.then(() => refreshFacts(heldId)).catch(() => undefined)
        }
      }
    })().catch(() => undefined)
    return () => ac.abort()
  }

  /** The timeline, fitted to the width of its card. */
  const drawEvents = () => { $("timeline").innerHTML = drawTimeline(events, $("timeline").clientWidth) }
  window.addEventListener("resize", () => { if (current !== null) drawEvents() })

  const closeDetail = () => {
    if (follow) follow()
    follow = null
    selected = null
    current = null
    document.body.classList.remove("detail-open")
    $("detail-pane").hidden = true
    document.querySelectorAll("#held-list li.selected").forEach((li) => li.classList.remove("selected"))
  }

  const open = async (heldId) => {
    if (identity === null) return
    hideConfirm()
    const r = await signedGet("/held/" + heldId)
    const body = await replyOf(r)
    if (r.status !== 200) {
      closeDetail()
      $("list-count").textContent = "(" + (body.error?.message ?? "not found") + ")"
      return
    }
    remember([heldId])
    $("attest-status").textContent = ""
    delete $("attest-status").dataset.disposition
    $("decision-reason").value = ""
    $("changed-notice").hidden = true
    current = null
    render(body.held)
    // Keyboard and screen-reader users land on the call they opened.
    $("detail-title").focus({ preventScroll: true })
    events = []
    drawEvents()
    if (follow) follow()
    follow = followEvents(heldId)
  }

  /** `#/held/<id>` opens that call; anything else shows the list. */
  const route = () => {
    const m = /^#\/held\/([A-Za-z0-9_-]+)$/.exec(location.hash)
    if (m) { if (m[1] !== selected) void open(m[1]) } else closeDetail()
  }
  window.addEventListener("hashchange", route)

  // ---- deciding ---------------------------------------------------------------------------

  /** Closes the confirmation; focus returns to the button that opened it. */
  const hideConfirm = () => {
    const was = pending?.decision
    pending = null
    $("confirm").hidden = true
    if (was !== undefined && !$(was).disabled && !$("decide-actions").hidden) $(was).focus()
  }

  /** Builds the attestation and shows what it says; nothing is signed until "Sign". */
  const prepare = async (decision) => {
    if (identity === null || current === null) return
    const presentation = current.witness_request?.presentation ?? {}
    const payload = A.attestPayload(identity, current, decision, reasonText(), await sha256Hex(jcs(presentation)), Date.now(), nonce())
    pending = payload
    pendingShown = shownKey(current)
    $("confirm").dataset.decision = decision
    $("confirm-title").textContent = (decision === "approve" ? "Approve" : "Reject") + " this call as " + payload.principal + " (" + payload.class + ")?"
    $("confirm-summary").textContent = summaryOf(current)
    const facts = A.confirmFacts(payload, toolOf(current) + " proposed by " + current.principal)
    $("confirm-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", "", k), el("dd", "", v)]))
    $("confirm-sign").className = decision === "approve" ? "approve" : "reject"
    $("confirm-sign").textContent = "Sign " + decision
    $("confirm").hidden = false
    setStatus("", undefined)
    $("confirm-sign").focus()
  }

  const sign = async () => {
    const payload = pending
    if (payload === null || current === null || payload.held_id !== current.held_id) return hideConfirm()
    // Signed only as confirmed: a call that changed since the confirmation was drawn is not signed.
    if (pendingShown !== shownKey(current)) return noticeChange({ generation: payload.generation }, current)
    hideConfirm()
    const r = await postSigned("/held/" + payload.held_id + "/attestations", payload)
    const said = A.replyWords(payload.decision, r.status, r.reply, identity)
    setStatus(said.text, said.disposition)
    if (r.status < 300) $("decision-reason").value = ""
    void refreshFacts(payload.held_id)
  }

  const cancelConfirm = () => {
    const d = pending?.decision ?? "decision"
    hideConfirm()
    setStatus(d + ": not signed", "not-signed")
  }

  $("approve").addEventListener("click", () => prepare("approve"))
  $("reject").addEventListener("click", () => prepare("reject"))
  $("confirm-sign").addEventListener("click", sign)
  $("confirm-cancel").addEventListener("click", cancelConfirm)
  // Escape closes the confirmation unsigned, as "Back" does.
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !$("confirm").hidden) {
      ev.preventDefault()
      cancelConfirm()
    }
  })

  loadIdentity().then(() => { refreshList(); refreshHealth(); route() })
  setInterval(refreshHealth, 10_000)
  // The list is the open-call index; re-read it every few seconds (the open call streams itself).
  setInterval(refreshList, 2000)
  setInterval(drawExpiry, 1000)
})()
