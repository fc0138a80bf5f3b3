// Result admission: a tool's result must match the shape the profile declares for that tool,
// so a compromised or confused tool cannot hand the model something else (extra fields, a
// string where a number belongs, an unbounded blob). A small JSON Schema subset: type
// (object, array, string, number, integer, boolean, null), properties, required,
// additionalProperties: false, items, enum (strings/numbers), maxLength, maxItems.
//   config: { "tools": { "bank_balance": { "type": "object", "required": ["balance"], ... } }, "unknown_tools"?: "admit" | "quarantine" }
import { runAdmit, AdmitInput, Admission, JObj, JValue, numberText } from "../../plugin-sdk/assembly/index"

export function admit(): i32 {
  return runAdmit(guard)
}

function typeName(v: JValue): string {
  if (v.isNull()) return "null"
  if (v.isBool()) return "boolean"
  if (v.isNum()) return "number"
  if (v.isStr()) return "string"
  if (v.isArr()) return "array"
  return "object"
}

/** The first mismatch as `path: problem`, or "" when `v` matches `schema`. */
function check(v: JValue, schema: JObj, path: string, depth: i32): string {
  if (depth > 32) return path + ": schema nesting over 32"
  const t = schema.getStr("type")
  if (t.length > 0) {
    const actual = typeName(v)
    const ok = t == actual || (t == "integer" && v.isNum() && Math.floor(v.asNum().value) == v.asNum().value && isFinite(v.asNum().value))
    if (!ok) return path + ": expected " + t + ", got " + actual
  }
  const en = schema.get("enum")
  if (en !== null && en.isArr()) {
    const opts = en.asArr()
    let found = false
    for (let i = 0; i < opts.length; i++) if (opts.at(i).stringify() == v.stringify()) found = true
    if (!found) return path + ": not one of the allowed values"
  }
  if (v.isStr() && schema.has("maxLength") && <f64>v.asStr().value.length > schema.getNum("maxLength")) return path + ": longer than " + numberText(schema.getNum("maxLength"))
  if (v.isArr()) {
    const a = v.asArr()
    if (schema.has("maxItems") && <f64>a.length > schema.getNum("maxItems")) return path + ": more than " + numberText(schema.getNum("maxItems")) + " items"
    const items = schema.get("items")
    if (items !== null && items.isObj()) {
      for (let i = 0; i < a.length; i++) {
        const e = check(a.at(i), items.asObj(), path + "[" + i.toString() + "]", depth + 1)
        if (e.length > 0) return e
      }
    }
  }
  if (v.isObj()) {
    const o = v.asObj()
    const required = schema.getArr("required")
    for (let i = 0; i < required.length; i++) {
      if (required.at(i).isStr() && !o.has(required.at(i).asStr().value)) return path + ": missing required field '" + required.at(i).asStr().value + "'"
    }
    const props = schema.getObj("properties")
    const closed = schema.has("additionalProperties") && !schema.getBool("additionalProperties", true)
    for (let i = 0; i < o.keys.length; i++) {
      const k = o.keys[i]
      const sub = props.get(k)
      if (sub !== null && sub.isObj()) {
        const e = check(o.values[i], sub.asObj(), path + "." + k, depth + 1)
        if (e.length > 0) return e
      } else if (closed) return path + ": unexpected field '" + k + "'"
    }
  }
  return ""
}

function guard(input: AdmitInput): Admission {
  const schema = input.config.getObj("tools").get(input.tool)
  if (schema === null || !schema.isObj()) {
    return input.config.getStr("unknown_tools", "admit") == "quarantine" ? Admission.quarantine("no result schema for " + input.tool) : Admission.admit()
  }
  const e = check(input.result, schema.asObj(), "result", 0)
  return e.length == 0 ? Admission.admit() : Admission.quarantine("result does not match the schema for " + input.tool + ": " + e)
}
