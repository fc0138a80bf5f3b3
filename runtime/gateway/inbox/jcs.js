// RFC 8785 canonical JSON (the bytes an envelope's signature covers): keys sorted by UTF-16
// code units, no whitespace, numbers and strings as ECMAScript's JSON.stringify writes them.
window.jcs = function jcs(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v)
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]"
  return "{" + Object.keys(v).filter((k) => v[k] !== undefined).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}"
}
