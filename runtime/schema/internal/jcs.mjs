// Shared by schema/Canonical.ts (through jcs.d.mts) and the workers that run without a TypeScript loader.
import canonicalize from "canonicalize"

/**
 * RFC 8785 (JCS) text of a value: the same output, and the same errors, as the `canonicalize`
 * package, faster on plain JSON data (call digests, held ids and
 * attestation digests of every signed event are on the replay's hot path): no `Set` per call,
 * no per-character scan in JS, strings without characters to escape written as they are.
 * Undefined members are left out and undefined array items written as null, as the package does (holes go to it);
 * anything else but plain JSON data (a non-finite number, a lone surrogate, `toJSON`, functions,
 * symbols, very deep or cyclic values) goes to the package itself.
 */
export const jcs = (value) => {
  const text = write(value, 0)
  return text === undefined ? canonicalizeOrThrow(value) : text
}

const canonicalizeOrThrow = (value) => {
  const text = canonicalize(value)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return text
}

/** Deeper than this goes to the package (which also detects cycles). */
const MaxDepth = 64
const NeedsEscape = /["\\\u0000-\u001f\u2028\u2029\ud800-\udfff]/

const str = (s) => (!NeedsEscape.test(s) ? `"${s}"` : s.isWellFormed() ? JSON.stringify(s) : undefined)

/** The JCS text, or undefined when the value is not plain JSON data. @returns {string | undefined} */
const write = (v, depth) => {
  switch (typeof v) {
    case "string":
      return str(v)
    case "number":
      return Number.isFinite(v) ? JSON.stringify(v) : undefined
    case "boolean":
      return v ? "true" : "false"
    case "object": {
      if (v === null) return "null"
      if (depth >= MaxDepth) return undefined
      if (typeof v.toJSON === "function") return undefined
      if (Array.isArray(v)) {
        let out = "["
        for (let i = 0; i < v.length; i++) {
          // A hole is not undefined to the package (it writes nothing there): left to it.
        const x = v[i] === undefined ? (i in v ? "null" : undefined) : write(v[i], depth + 1)
          if (x === undefined) return undefined
          out += i === 0 ? x : "," + x
        }
        return out + "]"
      }
      const o = v
      const keys = sortKeys(Object.keys(o))
      let out = "{"
      let first = true
      for (let i = 0; i < keys.length; i++) {
        const value = o[keys[i]]
        // The package leaves out members whose value is undefined (the reducer's optional fields).
        if (value === undefined) continue
        const k = str(keys[i])
        const x = write(value, depth + 1)
        if (k === undefined || x === undefined) return undefined
        out += (first ? "" : ",") + k + ":" + x
        first = false
      }
      return out + "}"
    }
    default:
      return undefined
  }
}

/**
 * Sorts an object's own keys by UTF-16 code units (as `Array.prototype.sort` does), in place. A
 * few keys are sorted by insertion: already in order, as most objects written by the kernel are,
 * that is one comparison each and no allocation (the built-in sort copies the array to sort it).
 */
const sortKeys = (keys) => {
  if (keys.length > 16) return keys.sort()
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]
    let j = i - 1
    while (j >= 0 && keys[j] > k) {
      keys[j + 1] = keys[j]
      j--
    }
    keys[j + 1] = k
  }
  return keys
}
