import { describe, expect, it } from "vitest"
import { Either, Schema } from "effect"
import { checkLayers, widens } from "../../runtime/policy/Layers.js"
import { activePolicy, registryOf } from "../../runtime/policy/ActivePolicy.js"
import { authorityOf, describePowers } from "../../runtime/policy/Authority.js"
import { Profile } from "../../runtime/schema/Profile.js"
import { softPasskey } from "../support/SoftPasskey.js"

const key = "YJSjUsQ9Y/uCYgLTMT+eOuFr+yWjVyB8EhU0/R3Wd5Q="
const pk = softPasskey({ origin: "https://inbox.example.com" })
const org = (passkeys?: ReadonlyArray<typeof pk.entry>): Profile => ({
  name: "acme-org",
  layer: "organization",
  principals: { "agent:alice": { keys: [key], classes: ["agent"] }, "user:carol": { keys: [], classes: ["human"], ...(passkeys ? { passkeys } : {}) } },
  grants: { "agent:alice": ["money_transfer"] },
  rules: { money_transfer: { amount_field: "amount", witness_above: 1000, contract: { rule: { class: "human" } } } },
  admins: ["admin:root", "admin:second"]
})

describe("a passkey is a power of its principal (runtime/policy/Authority.ts)", () => {
  it("registering one is a widening; removing it narrows", () => {
    expect(widens([org()], [org([pk.entry])])).toEqual([{ field: "principals.user:carol.passkeys", message: `passkey ${pk.entry.id} is added` }])
    expect(widens([org([pk.entry])], [org()])).toEqual([])
  })

  it("the same credential id with another key, origin or rp id is a new passkey: a widening", () => {
    const other = softPasskey({ origin: "https://inbox.example.com" })
    for (const changed of [{ ...pk.entry, public_key: other.entry.public_key }, { ...pk.entry, origin: "https://evil.example.com" }, { ...pk.entry, rp_id: "example.com" }])
      expect(widens([org([pk.entry])], [org([changed])]).map((w) => w.message)).toEqual([`passkey ${pk.entry.id} is added`])
  })

  it("a principal whose only credential is a passkey approves: its approval counts, and without it nothing", () => {
    const withKey = describePowers(authorityOf(activePolicy(1, [org([pk.entry])])), "user:carol")
    expect(withKey).toContain(`signs attestations with passkey ${pk.entry.id} (https://inbox.example.com)`)
    expect(withKey).toContain("its approval counts for money_transfer (as human)")
    expect(describePowers(authorityOf(activePolicy(1, [org()])), "user:carol")).not.toContain("its approval counts for money_transfer (as human)")
  })

  it("the registry's keys of a principal include its passkeys' COSE keys (an approval stops counting once its passkey is removed)", () => {
    expect(registryOf(activePolicy(1, [org([pk.entry])])).keysOf("user:carol")).toEqual([pk.entry.public_key])
    expect(registryOf(activePolicy(1, [org()])).keysOf("user:carol")).toEqual([])
  })

  it("a user layer cannot register a passkey the organization did not", () => {
    const user: Profile = { name: "carol-user", layer: "user", principals: { "user:carol": { keys: [], classes: ["human"], passkeys: [pk.entry] } } }
    expect(checkLayers([org(), user]).map((e) => e.message)).toContainEqual(expect.stringContaining(`passkey ${pk.entry.id} is not registered by organization 'acme-org'`))
    expect(checkLayers([org([pk.entry]), user])).toEqual([])
  })

  it("profiles merge a principal's passkeys (each once) and the profile schema refuses a malformed one", () => {
    const other = softPasskey({ origin: "https://inbox.example.com" })
    const merged = activePolicy(1, [org([pk.entry]), { name: "more", principals: { "user:carol": { keys: [], classes: [], passkeys: [pk.entry, other.entry] } } }])
    expect(merged.principals.get("user:carol")?.passkeys?.map((p) => p.id)).toEqual([pk.entry.id, other.entry.id])
    const decode = Schema.decodeUnknownEither(Profile)
    expect(Either.isRight(decode(org([pk.entry])))).toBe(true)
    expect(Either.isLeft(decode(org([{ ...pk.entry, origin: "https://inbox.example.com/path" }])))).toBe(true)
    expect(Either.isLeft(decode(org([{ ...pk.entry, alg: -257 as never }])))).toBe(true)
  })
})
