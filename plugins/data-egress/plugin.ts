// Data egress: a call that sends source code to a host that is not first-party is denied.
// "Source code" is a heuristic: a string with two or more code markers (import/def/#include/
// `=>`/`};` ...) or a file name with a source extension. The host is parsed from the URL
// argument; a URL that does not parse counts as third-party (fail closed). Otherwise no opinion.
//   config: { "tools": { "http_post": { "url_field": "url" } }, "first_party": ["corp.example", "*.corp.example"] }
import { runAdjudicate, AdjudicateInput, Opinion, JValue, collectStrings, stringList } from "../../plugin-sdk/assembly/index"

export function adjudicate(): i32 {
  return runAdjudicate(decide)
}

const Markers: string[] = [
  "import ", "def ", "#include", "#define", "=>", "};", "#!/", "public static", "console.log(", "print(", "require(",
  "function ", "function(", ") {", "){", ";\n", "package main", "fn main", "self.", "this.", "return "
]
const Extensions: string[] = [".ts", ".tsx", ".js", ".jsx", ".mjs", ".py", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".sql"]

function looksLikeSource(s: string): string {
  const t = s.trim()
  if (t.indexOf(" ") < 0 && t.indexOf("\n") < 0) {
    const lower = t.toLowerCase()
    for (let i = 0; i < Extensions.length; i++) if (lower.endsWith(Extensions[i])) return "a source file name (" + Extensions[i] + ")"
  }
  let hits = 0
  let first = ""
  for (let i = 0; i < Markers.length; i++) {
    if (s.includes(Markers[i])) {
      if (hits == 0) first = Markers[i].trim()
      hits++
    }
  }
  return hits >= 2 ? "code (" + hits.toString() + " markers, e.g. '" + first + "')" : ""
}

/** The lowercase host of an http(s) URL, or "" when it does not parse. */
function hostOf(url: string): string {
  const scheme = url.indexOf("://")
  if (scheme <= 0) return ""
  let rest = url.substring(scheme + 3)
  let end = rest.length
  const stops: string[] = ["/", "?", "#"]
  for (let i = 0; i < stops.length; i++) {
    const j = rest.indexOf(stops[i])
    if (j >= 0 && j < end) end = j
  }
  rest = rest.substring(0, end)
  if (rest.indexOf("@") >= 0) rest = rest.substring(rest.lastIndexOf("@") + 1)
  const colon = rest.lastIndexOf(":")
  if (colon >= 0 && rest.indexOf("]") < colon) rest = rest.substring(0, colon)
  if (rest.endsWith(".")) rest = rest.substring(0, rest.length - 1)
  return rest.toLowerCase()
}

function firstParty(host: string, list: Array<string>): bool {
  if (host.length == 0) return false
  for (let i = 0; i < list.length; i++) {
    const p = list[i].toLowerCase()
    if (p.startsWith("*.") ? host.endsWith(p.substring(1)) : host == p) return true
  }
  return false
}

function decide(input: AdjudicateInput): Opinion {
  const spec = input.config.getObj("tools").get(input.proposal.tool)
  if (spec === null || !spec.isObj()) return Opinion.defer()
  const urlField = spec.asObj().getStr("url_field", "url")
  const host = hostOf(input.proposal.args.getStr(urlField))
  if (firstParty(host, stringList(input.config.getArr("first_party")))) return Opinion.defer()
  const strings = new Array<string>()
  const args = input.proposal.args
  for (let i = 0; i < args.keys.length; i++) {
    if (args.keys[i] == urlField) continue
    const v: JValue = args.values[i]
    collectStrings(v, strings)
  }
  for (let i = 0; i < strings.length; i++) {
    const what = looksLikeSource(strings[i])
    if (what.length > 0) return Opinion.deny("source code egress: " + what + " to third-party host '" + (host.length > 0 ? host : "(unparsed url)") + "'")
  }
  return Opinion.defer()
}
