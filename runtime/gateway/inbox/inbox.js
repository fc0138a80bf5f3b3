// The approval inbox: lists held calls naming this witness, shows what it would sign, signs
// attestations in the browser (the secret key never leaves localStorage) and follows the call live.
;(function () {
  const $ = (id) => document.getElementById(id)
  const b64 = { enc: (u8) => btoa(String.fromCharCode(...u8)), dec: (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)) }
  let identity = null
  let selected = null
  let source = null
  let events = []

  const keyPairOf = (secret) => {
    const raw = b64.dec(secret.trim())
    if (raw.length === 32) return nacl.sign.keyPair.fromSeed(raw)
    if (raw.length === 64) return nacl.sign.keyPair.fromSecretKey(raw)
    throw new Error("the key must be 32 (seed) or 64 (secret key) bytes of base64")
  }

  const loadIdentity = () => {
    const saved = JSON.parse(localStorage.getItem("wk.identity") || "null")
    if (saved === null) return
    try {
      identity = { ...saved, keys: keyPairOf(saved.secret) }
      $("principal").value = saved.principal
      $("klass").value = saved.klass
      $("identity-status").textContent = "signing as " + saved.principal + " (" + b64.enc(identity.keys.publicKey).slice(0, 12) + "…)"
    } catch (e) {
      $("identity-status").textContent = String(e.message)
    }
  }

  $("identity").addEventListener("submit", (ev) => {
    ev.preventDefault()
    try {
      const saved = { principal: $("principal").value.trim(), klass: $("klass").value.trim(), secret: $("secret").value.trim() || (JSON.parse(localStorage.getItem("wk.identity") || "{}").secret ?? "") }
      keyPairOf(saved.secret)
      localStorage.setItem("wk.identity", JSON.stringify(saved))
      $("secret").value = ""
      loadIdentity()
      refreshList()
    } catch (e) {
      $("identity-status").textContent = "key not imported: " + e.message
    }
  })

  const refreshList = async () => {
    if (identity === null) return
    const r = await fetch("/held?principal=" + encodeURIComponent(identity.principal) + "&class=" + encodeURIComponent(identity.klass))
    const body = await r.json()
    const list = $("held-list")
    list.innerHTML = ""
    for (const h of body.held || []) {
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
    $("list-count").textContent = "(" + (body.held || []).length + ")"
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
  let current = null

  const open = async (heldId) => {
    const r = await fetch("/held/" + heldId)
    const body = await r.json()
    if (r.status !== 200) { $("attest-status").textContent = body.error?.message ?? "not found"; return }
    $("attest-status").textContent = ""
    render(body.held)
    events = []
    $("timeline").innerHTML = drawTimeline(events)
    if (source) source.close()
    source = new EventSource("/held/" + heldId + "/events")
    source.addEventListener("held-event", (m) => {
      const e = JSON.parse(m.data)
      if (events.some((x) => x.seq === e.seq)) return
      events.push(e)
      $("timeline").innerHTML = drawTimeline(events)
    })
    source.addEventListener("facts", (m) => { const h = JSON.parse(m.data); if (h.held_id === selected) render(h) })
    document.querySelectorAll("#held-list li").forEach((li) => li.classList.toggle("selected", li.dataset.heldId === heldId))
  }

  const attest = async (decision) => {
    if (identity === null || current === null) return
    const nonce = b64.enc(nacl.randomBytes(12)).replace(/[^A-Za-z0-9]/g, "x")
    const now = Date.now()
    // Binds the presentation shown above: sha256 of its canonical JSON (WebCrypto needs a secure context, as localhost is).
    const shown = current.witness_request?.presentation
    const presentationDigest = shown !== undefined && globalThis.crypto?.subtle !== undefined
      ? Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(jcs(shown)))), (b) => b.toString(16).padStart(2, "0")).join("")
      : undefined
    const payload = {
      op: "attest", principal: identity.principal, class: identity.klass, held_id: current.held_id,
      generation: current.generation, call_digest: current.call_digest, contract_digest: current.contract_digest,
      decision, issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce,
      ...(presentationDigest !== undefined ? { presentation_digest: presentationDigest } : {})
    }
    const sig = nacl.sign.detached(new TextEncoder().encode(jcs(payload)), identity.keys.secretKey)
    const envelope = { payload, key: b64.enc(identity.keys.publicKey), sig: b64.enc(sig) }
    const r = await fetch("/held/" + current.held_id + "/attestations", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(envelope) })
    const reply = await r.json()
    const status = $("attest-status")
    status.textContent = decision + ": " + (reply.disposition ?? reply.error?.message ?? r.status) + (reply.reason ? " — " + reply.reason : "")
    status.dataset.disposition = reply.disposition ?? "error"
  }
  $("approve").addEventListener("click", () => attest("approve"))
  $("reject").addEventListener("click", () => attest("reject"))

  loadIdentity()
  refreshList()
  // The list is the open-call index; re-read it every few seconds (the open call streams itself).
  setInterval(refreshList, 2000)
})()
