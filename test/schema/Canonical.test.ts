import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { callDigest, canonicalize, contractDigest, heldIdOf, jcsDigest, sha256Hex } from "../../runtime/schema/Canonical.js"
import { HeldId } from "../../runtime/schema/Ids.js"
import { Schema } from "effect"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const fromHex = (hex: string): number => Buffer.from(hex, "hex").readDoubleBE(0)

describe("JCS (RFC 8785) vectors", () => {
  it("3.2.2: the sample object (literals, numbers, string escapes, no whitespace)", () => {
    const input = JSON.parse(String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`)
    expect(canonicalize(input)).toBe(String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`)
  })

  it("3.2.3: properties sorted by UTF-16 code units (not code points, not locale)", () => {
    const input = JSON.parse(String.raw`{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }`)
    expect(canonicalize(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
  })

  // Appendix B: IEEE 754 bit patterns and their canonical text.
  const numbers: ReadonlyArray<[string, string]> = [
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"]
  ]
  it.each(numbers)("number %s -> %s", (bits, text) => {
    expect(canonicalize(fromHex(bits))).toBe(text)
    expect(canonicalize({ n: fromHex(bits) })).toBe(`{"n":${text}}`)
  })

  it("the 1e21 boundary: below is plain digits, at and above is exponent form", () => {
    expect(canonicalize(1e20)).toBe("100000000000000000000")
    expect(canonicalize(1e21)).toBe("1e+21")
    expect(canonicalize(1e-6)).toBe("0.000001")
    expect(canonicalize(1e-7)).toBe("1e-7")
  })

  it("NaN and infinities have no canonical form (B: 7fffffffffffffff, 7ff0000000000000)", () => {
    expect(() => canonicalize(fromHex("7fffffffffffffff"))).toThrow()
    expect(() => canonicalize(fromHex("7ff0000000000000"))).toThrow()
    expect(() => canonicalize({ a: -Infinity })).toThrow()
  })

  it("strings: only the mandatory escapes; lowercase \\u00xx for other controls; non-ASCII as is", () => {
    expect(canonicalize("\u0000\u0008\u0009\u000a\u000c\u000d\u001f\"\\/")).toBe('"\\u0000\\b\\t\\n\\f\\r\\u001f\\"\\\\/"')
    expect(canonicalize("\u2028\u2029é😀")).toBe('"\u2028\u2029é😀"')
  })

  it("lone surrogates are refused", () => {
    expect(() => canonicalize("\ud800")).toThrow()
    expect(() => canonicalize({ ["\udc00"]: 1 })).toThrow()
  })

  it("nested objects are sorted at every level; arrays keep their order", () => {
    expect(canonicalize({ b: [3, { z: 1, a: [] }, 1], a: { d: null, c: true } })).toBe('{"a":{"c":true,"d":null},"b":[3,{"a":[],"z":1},1]}')
  })

  it("key order and whitespace of the input never change the text (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = canonicalize(v)
        expect(canonicalize(JSON.parse(JSON.stringify(v, null, 2)))).toBe(text)
        expect(canonicalize(JSON.parse(text))).toBe(text) // idempotent
        expect(canonicalize(reversedKeys(v))).toBe(text)
      })
    )
  })
})

/** The same value with every object's keys inserted in reverse order. */
const reversedKeys = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(reversedKeys)
    : v !== null && typeof v === "object"
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).reverse().map(([k, x]) => [k, reversedKeys(x)]))
      : v

describe("digests", () => {
  const args = { to: "acct-b", memo: "rent €", from: "acct-a", amount: 250 }

  it("call_digest = sha256(JCS({tool, args})): a known value", () => {
    // printf '%s' '{"args":{"amount":250,"from":"acct-a","memo":"rent €","to":"acct-b"},"tool":"money_transfer"}' | sha256sum
    expect(callDigest("money_transfer", args)).toBe("d9caca55e7be3c1225f9d45b546daac176e931660742ba76e4559e08556372d9")
    expect(callDigest("money_transfer", args)).toBe(createHash("sha256").update('{"args":{"amount":250,"from":"acct-a","memo":"rent €","to":"acct-b"},"tool":"money_transfer"}', "utf8").digest("hex"))
  })

  it("call_digest ignores argument order and formatting, and sees every change of value or tool", () => {
    expect(callDigest("money_transfer", { amount: 250.0, from: "acct-a", to: "acct-b", memo: "rent €" })).toBe(callDigest("money_transfer", args))
    expect(callDigest("money_transfer", { ...args, amount: 251 })).not.toBe(callDigest("money_transfer", args))
    expect(callDigest("money_transfer", { ...args, amount: "250" })).not.toBe(callDigest("money_transfer", args))
    expect(callDigest("bank_balance", args)).not.toBe(callDigest("money_transfer", args))
  })

  it("contract_digest = sha256(JCS(witness_contract)): a known value", () => {
    // printf '%s' '{"rule":{"class":"human"},"veto":["compliance"]}' | sha256sum
    expect(contractDigest({ veto: ["compliance"], rule: { class: "human" } })).toBe("4cdb9876304ce2a99908c9c6dc6bf515decac797c2b8cbb4d5899a713d3c01b1")
  })

  it("digests are lowercase hex sha256", () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => { expect(jcsDigest(v)).toMatch(/^[0-9a-f]{64}$/) }))
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(sha256Hex(new Uint8Array([0x61, 0x62, 0x63]))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })
})

describe("heldIdOf", () => {
  it("is stable: a known value for known names", () => {
    // "h_" + first 32 hex of sha256('["agent:alice","s1","t1","c1"]')
    expect(heldIdOf("agent:alice", "s1", "t1", "c1")).toBe("h_df02ba9a7f539eaeabb76bf92db6b9a5")
    expect(heldIdOf("agent:alice", "s1", "t1", "c1")).toBe(heldIdOf("agent:alice", "s1", "t1", "c1"))
  })

  it("is a valid HeldId, and different names never collide by concatenation", () => {
    const ok = Schema.is(HeldId)
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.string(), (p, s, t, c) => {
        expect(ok(heldIdOf(p, s, t, c))).toBe(true)
      })
    )
    expect(heldIdOf("a", "bc", "d", "e")).not.toBe(heldIdOf("ab", "c", "d", "e"))
    expect(heldIdOf("agent:alice", "s1", "t1", "c1")).not.toBe(heldIdOf("agent:bob", "s1", "t1", "c1"))
    expect(heldIdOf("agent:alice", "s1", "t1", "c1")).not.toBe(heldIdOf("agent:alice", "s1", "t1", "c2"))
  })
})
