// The witness's signing key in this browser: a non-extractable WebCrypto Ed25519 key kept as a
// CryptoKey in IndexedDB. Page script can ask it to sign, never read it; nothing secret is in
// localStorage. `window.inboxKeys` is the whole interface.
;(function () {
  const DB = "wk-inbox", Store = "identity", Key = "current"
  const b64 = {
    enc: (u8) => btoa(String.fromCharCode(...new Uint8Array(u8))),
    dec: (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)),
    fromUrl: (s) => s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4)
  }

  const db = () =>
    new Promise((ok, fail) => {
      const req = indexedDB.open(DB, 1)
      req.onupgradeneeded = () => req.result.createObjectStore(Store)
      req.onsuccess = () => ok(req.result)
      req.onerror = () => fail(req.error)
    })
  const tx = async (mode, f) => {
    const d = await db()
    return new Promise((ok, fail) => {
      const t = d.transaction(Store, mode)
      const req = f(t.objectStore(Store))
      t.oncomplete = () => ok(req.result)
      t.onerror = () => fail(t.error)
    })
  }

  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410): the form WebCrypto imports private keys in.
  const pkcs8Prefix = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20])

  /** Where a person gets a key: the line `wk dev-key` prints. */
  const KeyHint = "paste the \"secret key\" line that wk dev-key <principal> prints (development), or the secret key your admin registered"

  /** The bytes of a pasted secret key, or an error a person can act on (never the browser's own words). */
  const decodeSecret = (secret) => {
    const text = secret.trim()
    if (text === "") throw new Error("no key given: " + KeyHint)
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw new Error("that is not a key (a key is base64: letters, digits, + and /): " + KeyHint)
    let raw
    try { raw = b64.dec(b64.fromUrl(text.replace(/=+$/, ""))) } catch { throw new Error("that is not a key (it is not valid base64): " + KeyHint) }
    if (raw.length !== 32 && raw.length !== 64) throw new Error("that is " + raw.length + " bytes, a key is 32 (seed) or 64 (secret key): " + KeyHint)
    return raw
  }

  /**
   * Imports a base64 secret (a 32-byte seed, or a 64-byte seed+public key) as a non-extractable
   * signing key. The seed passes through an extractable key once, to learn the public key (its
   * JWK `x`); the key kept cannot be exported, and the copies of the seed are overwritten.
   */
  const importSecret = async (secret) => {
    const raw = decodeSecret(secret)
    const der = new Uint8Array(48)
    der.set(pkcs8Prefix)
    der.set(raw.subarray(0, 32), 16)
    raw.fill(0)
    const once = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, true, ["sign"]).catch((e) => {
      throw new Error("this browser could not use that key as an Ed25519 key (" + e.name + ")")
    })
    der.fill(0)
    const jwk = await crypto.subtle.exportKey("jwk", once)
    const privateKey = await crypto.subtle.importKey("jwk", jwk, { name: "Ed25519" }, false, ["sign"])
    jwk.d = ""
    return { privateKey, publicKey: b64.fromUrl(jwk.x) }
  }

  /** A fresh key pair made in the browser: the private half never exists outside WebCrypto. */
  const generate = async () => {
    const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"])
    return { privateKey: pair.privateKey, publicKey: b64.enc(await crypto.subtle.exportKey("raw", pair.publicKey)) }
  }

  window.inboxKeys = {
    b64,
    /** Saves `{principal, klass, publicKey, privateKey}` (privateKey a non-extractable CryptoKey). */
    save: async (identity, key) => {
      if (key.privateKey.extractable) throw new Error("refusing to keep an extractable key")
      await tx("readwrite", (s) => s.put({ ...identity, publicKey: key.publicKey, privateKey: key.privateKey }, Key))
    },
    load: () => tx("readonly", (s) => s.get(Key)).then((v) => v ?? null),
    importSecret,
    decodeSecret,
    KeyHint,
    generate,
    /** Ed25519 signature of a string's UTF-8 bytes, base64. */
    sign: async (identity, text) => b64.enc(await crypto.subtle.sign({ name: "Ed25519" }, identity.privateKey, new TextEncoder().encode(text)))
  }
})()
