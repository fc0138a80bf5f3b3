// The approval inbox: lists the held calls this witness may decide, shows what it would sign,
// signs reads and attestations in the browser with a non-extractable key (keys.js), asks for a
// confirmation that restates what is signed, and follows the call live.
;(function () {
  const $ = (id) => document.getElementById(id)
  const { b64 } = inboxKeys
  let identity = null
  let selected = null
  let follow = null
  let events = []
  let current = null

  const showIdentity = () => {
    $("principal").value = identity.principal
    $("klass").value = identity.klass
    $("identity-status").textContent = "signing as " + identity.principal + " (" + identity.publicKey.slice(0, 12) + "…)"
    $("public-key").textContent = identity.publicKey
  }

  const loadIdentity = async () => {
    // localStorage holds no secret: an entry with a raw key in it is removed, not read.
    localStorage.removeItem("wk.identity")
    identity = await inboxKeys.load()
    if (identity !== null) showIdentity()
  }

  const useKey = async (makeKey) => {
    try {
      const who = { principal: $("principal").value.trim(), klass: $("klass").value.trim() }
      if (who.principal === "" || who.klass === "") throw new Error("give the principal and the class first")
      const key = await makeKey()
      await inboxKeys.save(who, key)
      $("secret").value = ""
      await loadIdentity()
      refreshList()
    } catch (e) {
      $("identity-status").textContent = "key not set: " + e.message
    }
  }
  $("identity").addEventListener("submit", (ev) => {
    ev.preventDefault()
    const secret = $("secret").value
    // No secret given: keep the stored key, change who it signs as.
    if (secret.trim() === "" && identity !== null) return useKey(async () => identity)
    return useKey(() => inboxKeys.importSecret(secret))
  })
  $("generate-key").addEventListener("click", () => useKey(inboxKeys.generate))

  /** A signed envelope of `payload` as this witness (JCS bytes, Ed25519). */
  const signedEnvelope = async (payload) => ({ payload, key: identity.publicKey, sig: await inboxKeys.sign(identity, jcs(payload)) })

  const nonce = () => b64.enc(crypto.getRandomValues(new Uint8Array(12))).replace(/[^A-Za-z0-9]/g, "x")

  /** The gateway authenticates every read: `Authorization: WK-Read` over method, path, time and a fresh nonce. */
  const readHeaders = async (path) => {
    const env = await signedEnvelope({ op: "read", principal: identity.principal, method: "GET", path, issued_at: new Date().toISOString(), nonce: nonce() })
    return { authorization: "WK-Read " + btoa(JSON.stringify(env)) }
  }
  const signedGet = async (path, init = {}) => fetch(path, { ...init, headers: await readHeaders(path) })

  const refreshList = async () => {
    if (identity === null) return
    const r = await signedGet("/held")
    const body = await r.json()
    // The listing also holds this principal's own proposals; the inbox shows what it may witness.
    const held = (body.held || []).filter((h) => h.view === "witness")
    const list = $("held-list")
    list.innerHTML = ""
    for (const h of held) {
      const li = document.createElement("li")
      li.dataset.heldId = h.held_id
      if (selected === h.held_id) li.className = "selected"
      const p = h.witness_request?.presentation ?? {}
      li.innerHTML = `<div class="tool"></div><div class="muted"></div><div class="muted"></div>`
      li.children[0].textContent = (p.tool ?? h.tool) + (p.summary ? " — " + p.summary : "")
      li.children[1].textContent = "from " + h.principal + " · readiness " + h.readiness
      li.children[2].textContent = h.held_id
      li.addEventListener("click", () => open(h.held_id))
      list.appendChild(li)
    }
    $("list-count").textContent = r.status === 200 ? "(" + held.length + ")" : "(" + (body.error?.message ?? r.status) + ")"
  }

  const render = (h) => {
    const wr = h.witness_request ?? {}
    const p = wr.presentation ?? {}
    $("detail-pane").hidden = false
    $("detail-title").textContent = (p.tool ?? h.tool) + " proposed by " + h.principal
    $("detail-summary").textContent = p.summary ?? wr.contract?.summary ?? ""
    // Only the presentation is shown: with disclosure "redacted" the kernel has replaced the values.
    $("disclosure").textContent = "disclosure: " + (p.disclosure ?? "exact")
    $("presentation").textContent = JSON.stringify({ tool: p.tool, args: p.args, ...(p.proposed ? { proposed: p.proposed } : {}) }, null, 2)
    const dl = $("digests")
    dl.innerHTML = ""
    for (const [k, v] of [["held_id", h.held_id], ["generation", h.generation], ["call_digest", h.call_digest], ["contract_digest", h.contract_digest], ["class", identity?.klass ?? "—"]]) {
      const dt = document.createElement("dt"); dt.textContent = k
      const dd = document.createElement("dd"); dd.textContent = String(v); dd.id = "digest-" + k
      dl.append(dt, dd)
    }
    $("rule").textContent = JSON.stringify({ rule: h.active_rule, ...(h.witness_contract?.veto ? { veto: h.witness_contract.veto } : {}) }, null, 2)
    const tbody = $("evidence").querySelector("tbody")
    tbody.innerHTML = ""
    for (const e of h.evidence ?? []) {
      const tr = document.createElement("tr")
      for (const c of [e.witness, e.class, e.decision, e.status + (e.reason ? " (" + e.reason + ")" : "")]) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td) }
      tbody.appendChild(tr)
    }
    const state = h.lifecycle === "open" ? "open · " + h.readiness + " · " + h.execution : h.lifecycle + (h.continuation_delivery !== "none" ? " · " + h.continuation_delivery : "")
    $("state").textContent = state
    $("state").dataset.lifecycle = h.lifecycle
    const canSign = identity !== null && h.lifecycle === "open" && h.execution === "none"
    $("approve").disabled = !canSign
    $("reject").disabled = !canSign
    selected = h.held_id
    current = h
  }

  /** Re-reads the selected call's facts (after each event of its stream). */
  const refreshFacts = async (heldId) => {
    const r = await signedGet("/held/" + heldId)
    if (r.status !== 200) return
    const body = await r.json()
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
          if (events.some((x) => x.seq === e.seq)) continue
          events.push(e)
          $("timeline").innerHTML = drawTimeline(events)
          facts = facts.then(() => refreshFacts(heldId)).catch(() => undefined)
        }
      }
    })().catch(() => undefined)
    return () => ac.abort()
  }

  const open = async (heldId) => {
    const r = await signedGet("/held/" + heldId)
    const body = await r.json()
    if (r.status !== 200) { $("attest-status").textContent = body.error?.message ?? "not found"; return }
    $("attest-status").textContent = ""
    render(body.held)
    events = []
    $("timeline").innerHTML = drawTimeline(events)
    if (follow) follow()
    follow = followEvents(heldId)
    document.querySelectorAll("#held-list li").forEach((li) => li.classList.toggle("selected", li.dataset.heldId === heldId))
  }

  /** Restates what the signature will say, and asks before signing it. */
  const confirmSigning = (payload) =>
    window.confirm(
      [
        `Sign "${payload.decision}" as ${payload.principal} (class ${payload.class})?`,
        "",
        `call       ${current.tool} proposed by ${current.principal}`,
        `held_id    ${payload.held_id}`,
        `generation ${payload.generation}`,
        `call_digest     ${payload.call_digest}`,
        `contract_digest ${payload.contract_digest}`,
        `valid until ${payload.expires_at}`,
        "",
        "Your signature binds to exactly this call and contract; a changed call needs a new one."
      ].join("\n")
    )

  const attest = async (decision) => {
    if (identity === null || current === null) return
    const now = Date.now()
    const payload = {
      op: "attest", principal: identity.principal, class: identity.klass, held_id: current.held_id,
      generation: current.generation, call_digest: current.call_digest, contract_digest: current.contract_digest,
      decision, issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: nonce()
    }
    if (!confirmSigning(payload)) { $("attest-status").textContent = decision + ": not signed"; return }
    const envelope = await signedEnvelope(payload)
    const r = await fetch("/held/" + current.held_id + "/attestations", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(envelope) })
    const reply = await r.json()
    const status = $("attest-status")
    status.textContent = decision + ": " + (reply.disposition ?? reply.error?.message ?? r.status) + (reply.reason ? " — " + reply.reason : "")
    status.dataset.disposition = reply.disposition ?? "error"
  }
  $("approve").addEventListener("click", () => attest("approve"))
  $("reject").addEventListener("click", () => attest("reject"))

  loadIdentity().then(refreshList)
  // The list is the open-call index; re-read it every few seconds (the open call streams itself).
  setInterval(refreshList, 2000)
})()
