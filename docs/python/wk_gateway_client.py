"""A Witness Kernel client over the HTTP gateway, with the standard library and `cryptography`.

    python3 wk_gateway_client.py check-vectors ../signing-vectors.json
    python3 wk_gateway_client.py propose http://127.0.0.1:8787 agent:alice <seed-base64> money_transfer '{"from":"alice","to":"bob","amount":250}'
    python3 wk_gateway_client.py attest http://127.0.0.1:8787 user:carol <seed-base64> <held_id> <generation> <call_digest> <contract_digest> [class]

Requests are envelopes {"payload", "key", "sig"}: `sig` is ed25519 over the UTF-8 bytes of the
RFC 8785 (JCS) canonical JSON of `payload`, `key` the 32-byte public key; both standard base64
with padding (docs/protocol.md). `jcs` below covers what the protocol's payloads contain:
objects, arrays, strings, booleans, null, and integers within +-2**53; a payload with floats
or with keys outside the Basic Multilingual Plane needs a full JCS implementation.
"""

import base64
import hashlib
import json
import os
import sys
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def jcs(value) -> str:
    """RFC 8785 canonical JSON for integers, strings, booleans, null, arrays and objects."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        if abs(value) > 2**53:
            raise ValueError("integers beyond 2**53 are not exact in JSON numbers")
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= 2**53:
            return str(int(value))
        raise ValueError("floats need a full JCS number serializer (ECMAScript Number.prototype.toString)")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, dict):
        # JCS sorts keys by UTF-16 code units; for keys within the BMP that is code point order.
        keys = sorted(value.keys(), key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + jcs(value[k]) for k in keys) + "}"
    raise TypeError(f"not JSON: {type(value).__name__}")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def signer(seed_b64: str):
    """The private key from a 32-byte seed (base64), and its public key (base64)."""
    key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(seed_b64))
    return key, b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def envelope(payload: dict, seed_b64: str) -> dict:
    key, public = signer(seed_b64)
    return {"payload": payload, "key": public, "sig": b64(key.sign(jcs(payload).encode("utf-8")))}


def call_digest(tool: str, args: dict) -> str:
    return hashlib.sha256(jcs({"tool": tool, "args": args}).encode("utf-8")).hexdigest()


def post(url: str, body: dict) -> tuple:
    req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def fresh() -> dict:
    expires = datetime.now(timezone.utc) + timedelta(minutes=5)
    return {"nonce": os.urandom(12).hex(), "expires_at": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z")}


def propose(gateway: str, principal: str, seed: str, tool: str, args: dict) -> tuple:
    payload = {"op": "propose", "principal": principal, "session_id": "s-python", "turn_id": "t1", "call_id": "c-" + os.urandom(6).hex(), "tool": tool, "args": args, **fresh()}
    return post(gateway + "/tool-calls", envelope(payload, seed))


def attest(gateway: str, principal: str, seed: str, held_id: str, generation: int, digest: str, contract_digest: str, witness_class: str = "human") -> tuple:
    now = datetime.now(timezone.utc)
    payload = {
        "op": "attest", "principal": principal, "held_id": held_id, "generation": generation, "call_digest": digest,
        "contract_digest": contract_digest, "class": witness_class, "decision": "approve", "nonce": os.urandom(12).hex(),
        "issued_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "expires_at": (now + timedelta(hours=1)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    return post(f"{gateway}/held/{held_id}/attestations", envelope(payload, seed))


def check_vectors(path: str) -> int:
    """Checks this client against docs/signing-vectors.json; vectors with floats or non-BMP keys are skipped."""
    failures = 0
    for v in json.load(open(path, encoding="utf-8"))["vectors"]:
        try:
            canonical = jcs(v["payload"])
        except ValueError as e:
            print(f"skip {v['name']}: {e}")
            continue
        env = envelope(v["payload"], v["seed"])
        checks = {"jcs": canonical == v["jcs"], "key": env["key"] == v["key"], "sig": env["sig"] == v["sig"],
                  "payload_digest": hashlib.sha256(canonical.encode("utf-8")).hexdigest() == v["payload_digest"]}
        if "call_digest" in v:
            checks["call_digest"] = call_digest(v["payload"]["tool"], v["payload"]["args"]) == v["call_digest"]
        bad = [k for k, ok in checks.items() if not ok]
        print(("FAIL " if bad else "ok   ") + v["name"] + (f": {', '.join(bad)}" if bad else ""))
        failures += len(bad) > 0
    return 1 if failures else 0


def main(argv: list) -> int:
    if len(argv) >= 2 and argv[0] == "check-vectors":
        return check_vectors(argv[1])
    if len(argv) == 6 and argv[0] == "propose":
        status, body = propose(argv[1], argv[2], argv[3], argv[4], json.loads(argv[5]))
    elif len(argv) in (8, 9) and argv[0] == "attest":
        status, body = attest(argv[1], argv[2], argv[3], argv[4], int(argv[5]), argv[6], argv[7], *(argv[8:9]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps({"http_status": status, "reply": body}))
    return 0 if status < 400 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
