// Draws a held call's events as a path across lanes: the route a call took is rarely a line
// (evidence arrives, an edit makes it stale, it becomes ready, runs, is delivered).
;(function () {
  const lanes = [
    { name: "held", match: (t) => t.startsWith("call.") || t === "policy.epoch_changed" || t === "witness.fallback_applied" },
    { name: "evidence", match: (t) => t.startsWith("attestation.") || t === "standing.applied" },
    { name: "readiness", match: (t) => t === "readiness.changed" },
    { name: "executed", match: (t) => t.startsWith("execution.") || t.startsWith("effect.") || t === "reconcile.bound_exceeded" },
    { name: "result", match: (t) => t.startsWith("result.") },
    { name: "delivered", match: (t) => t.startsWith("delivery.") }
  ]
  const colour = (e) => {
    if (e.type === "readiness.changed") return e.readiness === "stale" ? "#d97706" : e.readiness === "satisfied" ? "#16a34a" : "#64748b"
    if (e.type === "attestation.accepted") return e.decision === "reject" ? "#dc2626" : "#2563eb"
    if (e.type === "standing.applied") return "#2563eb"
    if (e.type === "attestation.rejected" || e.type === "call.denied" || e.type === "call.cancelled" || e.type === "call.expired") return "#dc2626"
    if (e.type === "effect.recorded" || e.type === "result.admitted" || e.type === "delivery.acknowledged") return "#16a34a"
    return "#475569"
  }
  const label = (e) => {
    if (e.type === "readiness.changed") return e.readiness === "satisfied" ? "ready" : e.readiness
    if (e.type === "attestation.accepted") return e.decision + " · " + e.witness
    if (e.type === "standing.applied") return "standing approval " + e.grant_id + " · " + e.witness
    return e.type
  }
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c])
  /** The events as an SVG; given the width available, the steps shrink (to 40 px) so the whole path fits it. */
  window.drawTimeline = function (events, fitWidth) {
    const laneH = 46, left = 90, top = 20
    const room = typeof fitWidth === "number" && fitWidth > 0 ? (fitWidth - left - 40) / Math.max(1, events.length) : 76
    const step = Math.max(40, Math.min(76, Math.floor(room)))
    const width = left + Math.max(1, events.length) * step + 40
    const height = top + lanes.length * laneH + 20
    const pts = events.map((e, i) => {
      const lane = Math.max(0, lanes.findIndex((l) => l.match(e.type)))
      return { e, x: left + i * step + step / 2, y: top + lane * laneH + laneH / 2 }
    })
    let svg = `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="timeline of the call's events" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`
    lanes.forEach((l, i) => {
      const y = top + i * laneH + laneH / 2
      svg += `<line x1="${left - 6}" y1="${y}" x2="${width - 10}" y2="${y}" stroke="#e2e8f0"/><text x="6" y="${y + 4}" class="lane">${l.name}</text>`
    })
    if (pts.length > 1) svg += `<polyline fill="none" stroke="#94a3b8" stroke-width="2" points="${pts.map((p) => p.x + "," + p.y).join(" ")}"/>`
    pts.forEach((p, i) => {
      svg += `<g class="node" data-type="${esc(p.e.type)}" data-seq="${esc(p.e.seq ?? i)}"><title>${esc(p.e.type)} at ${esc(p.e.at)}</title>` +
        `<circle cx="${p.x}" cy="${p.y}" r="8" fill="${colour(p.e)}"/>` +
        `<text x="${p.x}" y="${p.y + (i % 2 ? 22 : -13)}" text-anchor="middle" class="ev"${step < 76 ? ` transform="rotate(${i % 2 ? 20 : -20} ${p.x} ${p.y + (i % 2 ? 22 : -13)})"` : ""}>${esc(label(p.e))}</text></g>`
    })
    return svg + "</svg>"
  }
})()
