import { describe, expect, it } from "vitest"
import { inboxScripts } from "./InboxScript.js"

const A = inboxScripts<{
  attestPayload: (viewer: object, h: object, decision: string, reason: string, pd: string, now: number, nonce: string) => Record<string, unknown>
  extendPayload: (viewer: object, h: object, byMs: number, reason: string, now: number, nonce: string) => Record<string, unknown>
  replyWords: (what: string, status: number, reply: unknown, viewer: object | null) => { text: string; disposition: string }
  confirmFacts: (payload: Record<string, unknown>, call: string) => Array<[string, string]>
}>(["actions.js"], "inboxActions")
const K = inboxScripts<{ decodeSecret: (s: string) => Uint8Array }>(["keys.js"], "inboxKeys", { atob, btoa })

const carol = { principal: "user:carol", klass: "human" }
const h = { held_id: "h1", generation: 2, call_digest: "c", contract_digest: "k", expires_at: "2026-12-07T20:30:00.000Z" }
const now = Date.parse("2026-12-07T20:00:00.000Z")

describe("inbox actions", () => {
  it("an attestation binds the viewer, the call's generation and digests, the presentation shown, and the reason given", () => {
    expect(A.attestPayload(carol, h, "reject", "not on the list", "p", now, "n1")).toEqual({
      op: "attest", principal: "user:carol", class: "human", held_id: "h1", generation: 2, call_digest: "c", contract_digest: "k", decision: "reject",
      issued_at: "2026-12-07T20:00:00.000Z", expires_at: "2026-12-07T20:10:00.000Z", nonce: "n1", presentation_digest: "p", reason: "not on the list"
    })
    expect(A.attestPayload(carol, h, "approve", "", "p", now, "n1")).not.toHaveProperty("reason")
    expect(A.extendPayload(carol, h, 900_000, "", now, "n2")["extend_to"]).toBe("2026-12-07T20:45:00.000Z")
    expect(A.confirmFacts(A.attestPayload(carol, h, "approve", "", "p", now, "n"), "money_transfer proposed by agent:alice").map(([k]) => k)).toEqual(
      ["decision", "signed as", "call", "reason", "held_id", "generation", "call_digest", "contract_digest", "presentation_digest", "valid until"]
    )
  })

  it("says what came of a reply in one sentence; an unknown key says how to fix it", () => {
    expect(A.replyWords("approve", 202, { disposition: "accepted" }, carol)).toEqual({ text: "approve: accepted", disposition: "accepted" })
    expect(A.replyWords("reject", 409, { disposition: "stale", reason: "generation 2 superseded" }, carol).text).toBe("reject: stale — generation 2 superseded")
    const unknown = A.replyWords("approve", 401, { error: { code: "unauthorized", message: "bad signature" } }, carol)
    expect(unknown.disposition).toBe("unauthorized")
    expect(unknown.text).toContain("the kernel does not know this key for user:carol")
    expect(A.replyWords("approve", 0, { error: { message: "the gateway is not answering" } }, carol).text).toBe("approve: the gateway is not answering")
  })

  it("a pasted key that is not one is refused in words that say where to get one, never the browser's", () => {
    for (const garbage of ["", "not a key!", "abc$%^", "AAAA"]) {
      expect(() => K.decodeSecret(garbage)).toThrow(/wk dev-key <principal>/)
    }
    expect(() => K.decodeSecret("AAAA")).toThrow(/that is 3 bytes/)
    expect(K.decodeSecret(Buffer.alloc(64, 7).toString("base64")).length).toBe(64)
    expect(K.decodeSecret(Buffer.alloc(32, 7).toString("base64url")).length).toBe(32)
  })
})
