// Result admission: quarantines a result that carries a credential. Supersedes secret-scan's
// plain markers with shape checks, so a mention of "AKIA" in prose passes while a real key id
// does not: PEM private keys, AWS access key ids (AKIA/ASIA + 16), GitHub tokens (ghp_ & co,
// github_pat_), Slack tokens (xox?-), Stripe live keys, Google API keys (AIza + 35), JWTs, and
// `Bearer` tokens. The reason names the kind and never echoes the secret.
//   config: { "skip"?: ["jwt"] }  (kinds to not check)
import { runAdmit, AdmitInput, Admission, collectStrings, stringList } from "../../plugin-sdk/assembly/index"

export function admit(): i32 {
  return runAdmit(scan)
}

function isUpperAlnum(c: i32): bool { return (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) }
function isAlnum(c: i32): bool { return isUpperAlnum(c) || (c >= 0x61 && c <= 0x7a) }
function isTokenChar(c: i32): bool { return isAlnum(c) || c == 0x5f || c == 0x2d }
function isB64Url(c: i32): bool { return isTokenChar(c) }

/** Length of the run of chars from `at` that pass `kind` (0 upper-alnum, 1 alnum, 2 token, 3 base64url). */
function run(s: string, at: i32, kind: i32): i32 {
  let n = 0
  while (at + n < s.length) {
    const c = s.charCodeAt(at + n)
    const ok = kind == 0 ? isUpperAlnum(c) : kind == 1 ? isAlnum(c) : isTokenChar(c)
    if (!ok) break
    n++
  }
  return n
}

/** True when `prefix` occurs in `s` followed by at least `min` chars of `kind`, not glued to a preceding word char. */
function prefixed(s: string, prefix: string, kind: i32, min: i32): bool {
  let from = 0
  while (true) {
    const i = s.indexOf(prefix, from)
    if (i < 0) return false
    const glued = i > 0 && isAlnum(s.charCodeAt(i - 1))
    if (!glued && run(s, i + prefix.length, kind) >= min) return true
    from = i + 1
  }
  return false
}

function privateKey(s: string): bool {
  let from = 0
  while (true) {
    const i = s.indexOf("-----BEGIN ", from)
    if (i < 0) return false
    const end = s.indexOf("-----", i + 11)
    if (end > 0 && end - i < 60 && s.substring(i, end).includes("PRIVATE KEY")) return true
    from = i + 1
  }
  return false
}

function jwt(s: string): bool {
  let from = 0
  while (true) {
    const i = s.indexOf("eyJ", from)
    if (i < 0) return false
    const a = run(s, i, 3)
    if (a >= 10 && i + a < s.length && s.charCodeAt(i + a) == 0x2e) {
      const b = run(s, i + a + 1, 3)
      if (b >= 10 && i + a + 1 + b < s.length && s.charCodeAt(i + a + 1 + b) == 0x2e && run(s, i + a + 2 + b, 3) >= 10) return true
    }
    from = i + 1
  }
  return false
}

function kindOf(s: string, skip: Array<string>): string {
  if (!skip.includes("private_key") && privateKey(s)) return "private_key"
  if (!skip.includes("aws_access_key")) {
    if (prefixed(s, "AKIA", 0, 16) || prefixed(s, "ASIA", 0, 16)) return "aws_access_key"
    if (s.includes("aws_secret_access_key")) return "aws_access_key"
  }
  if (!skip.includes("github_token")) {
    const gh: string[] = ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]
    for (let i = 0; i < gh.length; i++) if (prefixed(s, gh[i], 1, 30)) return "github_token"
    if (prefixed(s, "github_pat_", 2, 22)) return "github_token"
  }
  if (!skip.includes("slack_token")) {
    const sl: string[] = ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"]
    for (let i = 0; i < sl.length; i++) if (prefixed(s, sl[i], 2, 10)) return "slack_token"
  }
  if (!skip.includes("stripe_key") && (prefixed(s, "sk_live_", 1, 16) || prefixed(s, "rk_live_", 1, 16))) return "stripe_key"
  if (!skip.includes("google_api_key") && prefixed(s, "AIza", 2, 35)) return "google_api_key"
  if (!skip.includes("jwt") && jwt(s)) return "jwt"
  if (!skip.includes("bearer_token") && (prefixed(s, "Bearer ", 2, 20) || prefixed(s, "bearer ", 2, 20))) return "bearer_token"
  return ""
}

function scan(input: AdmitInput): Admission {
  const skip = stringList(input.config.getArr("skip"))
  const strings = new Array<string>()
  collectStrings(input.result, strings)
  for (let i = 0; i < strings.length; i++) {
    const k = kindOf(strings[i], skip)
    if (k.length > 0) return Admission.quarantine("result contains a secret (" + k + ")")
  }
  return Admission.admit()
}
