import { describe, expect, it } from "vitest"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { makeSignatureVerifier } from "../../runtime/audit/internal/SignatureVerifier.js"

const enc = new TextEncoder()
const event = (envelope: unknown) => ({ type: "call.proposed", held_id: "h_x", ...(envelope === undefined ? {} : { envelope }) })
/** A commit of one event, or of `more` events beside it. */
const body = (envelope: unknown, more: ReadonlyArray<unknown> = []) => enc.encode(JSON.stringify({ commit_id: "c", held_id: "h_x", events: [event(envelope), ...more.map(event)] }))
const good = signEnvelope({ op: "propose", principal: "agent:alice", args: { n: 1, s: "\u2028é" } }, devKeyPair("agent:alice").secretKey)
const forged = { ...good, payload: { ...good.payload, args: { n: 2 } } }

describe("SignatureVerifier", () => {
  it("answers every message of many batches, in any pool size, across reused workers", async () => {
    for (const size of [1, 2, 2, 3]) {
      const v = makeSignatureVerifier(size)
      const n = 700
      for (let seq = 1; seq <= n; seq++) v.submit(seq, body(seq % 7 === 0 ? forged : seq % 11 === 0 ? undefined : good))
      v.flush()
      expect(v.answered(n)).toBe(false)
      const verdicts = await v.finish()
      for (let seq = 1; seq <= n; seq++) {
        expect(v.answered(seq)).toBe(true)
        // No envelope: no verdict (the checks verify what they find themselves).
        expect([seq, v.verdict(seq)]).toEqual([seq, seq % 7 === 0 ? false : seq % 11 === 0 ? undefined : true])
      }
      expect(verdicts.size).toBe(n - Math.floor(n / 11) + Math.floor(n / 77))
    }
  })

  it("a body larger than a batch buffer, malformed bodies and keys are answered too", async () => {
    const v = makeSignatureVerifier(2)
    const big = signEnvelope({ op: "propose", principal: "agent:alice", blob: "x".repeat(300_000) }, devKeyPair("agent:alice").secretKey)
    v.submit(1, body(big))
    v.submit(2, enc.encode("{not json"))
    v.submit(3, body({ ...good, key: "AAAA" }))
    v.submit(4, body({ ...good, sig: 5 }))
    // A commit is answered as a whole: one forged envelope among good ones makes it false.
    v.submit(5, body(good, [undefined, good]))
    v.submit(6, body(good, [forged]))
    v.submit(7, body(undefined, [undefined]))
    await v.finish()
    expect([1, 2, 3, 4, 5, 6, 7].map((s) => v.verdict(s))).toEqual([true, false, false, false, true, false, undefined])
  })

  it("with no workers, nothing is answered ahead: every verdict is left to the checks", async () => {
    const v = makeSignatureVerifier(0)
    v.submit(1, body(good))
    expect(v.answered(1)).toBe(true)
    expect(v.verdict(1)).toBeUndefined()
    expect((await v.finish()).size).toBe(0)
  })
})
