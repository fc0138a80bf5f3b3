import type { Command } from "@effect/cli"

/**
 * Help text for a `wk` command, read from the @effect/cli descriptor it was built from (so it
 * cannot drift from the parser): plain text, no colours, at most 100 columns, one line of
 * description per option and argument, and the command's full path in the usage line.
 */

const Width = 100

/** The parts of @effect/cli's internal descriptor, options and args trees that help reads. */
type Node = { readonly _tag: string; readonly [k: string]: unknown }

/** One option or argument as help shows it. */
interface Entry {
  readonly label: string
  readonly description: string
}

/** The words of an @effect/cli HelpDoc or Span (paragraphs, spans, lists), as one plain line. */
export const plain = (doc: unknown): string => {
  const words = (d: unknown): string => {
    if (typeof d !== "object" || d === null || !("_tag" in d)) return ""
    const n = d as Node
    switch (n._tag) {
      case "Sequence":
        return `${words(n["left"])} ${words(n["right"])}`
      case "Header":
      case "Paragraph":
        return words(n["value"])
      case "DescriptionList":
        return (n["definitions"] as ReadonlyArray<readonly [unknown, unknown]>).map(([k, v]) => `${words(k)}: ${words(v)}`).join("; ")
      case "Enumeration":
        return (n["elements"] as ReadonlyArray<unknown>).map(words).join("; ")
      default:
        return typeof n["value"] === "string" ? n["value"] : ""
    }
  }
  return words(doc).replace(/\s+/g, " ").trim()
}

const placeholderOf = (single: Node): string => {
  const pseudo = single["pseudoName"] as { _tag: string; value?: string } | undefined
  if (pseudo?._tag === "Some" && pseudo.value) return pseudo.value.toUpperCase()
  const type = single["primitiveType"] as Node
  switch (type._tag) {
    case "Bool":
      return ""
    case "Integer":
    case "Float":
      return "N"
    case "Path":
      return type["pathType"] === "directory" ? "DIR" : "FILE"
    case "Choice":
      return (type["alternatives"] as ReadonlyArray<readonly [string, unknown]>).map(([k]) => k).join("|")
    default:
      return String(single["name"]).toUpperCase().replace(/-/g, "_")
  }
}

const shown = (v: unknown): string | undefined => {
  if (v === false || v === undefined || v === null) return undefined
  if (typeof v === "object" && "_tag" in v) return (v as { _tag: string })._tag === "Some" ? shown((v as { value?: unknown }).value) : undefined
  return typeof v === "string" ? v : JSON.stringify(v)
}

const optionEntries = (o: Node, fallback?: string): Array<Entry> => {
  switch (o._tag) {
    case "Single": {
      const aliases = (o["aliases"] as ReadonlyArray<string>).map((a) => (a.length === 1 ? `-${a}` : `--${a}`))
      const placeholder = placeholderOf(o)
      const description = plain(o["description"])
      return [
        {
          label: [...aliases, `--${String(o["name"])}`].join(", ") + (placeholder === "" ? "" : ` ${placeholder}`),
          description: `${description === "" ? "(no description)" : description}${fallback !== undefined ? ` (default: ${fallback})` : ""}`
        }
      ]
    }
    case "Both":
    case "OrElse":
      return [...optionEntries(o["left"] as Node), ...optionEntries(o["right"] as Node)]
    case "Map":
      return optionEntries(o["options"] as Node, fallback)
    case "WithDefault":
      return optionEntries(o["options"] as Node, shown(o["fallback"]))
    case "WithFallback":
      return optionEntries(o["options"] as Node, fallback)
    case "Variadic":
    case "KeyValueMap":
      return optionEntries(o["argumentOption"] as Node, fallback)
    default:
      return []
  }
}

const argEntries = (a: Node, fallback?: string): Array<Entry> => {
  switch (a._tag) {
    case "Single": {
      const description = plain(a["description"])
      return [{ label: String(a["name"]), description: `${description === "" ? "(no description)" : description}${fallback !== undefined ? ` (default: ${fallback})` : ""}` }]
    }
    case "Both":
      return [...argEntries(a["left"] as Node), ...argEntries(a["right"] as Node)]
    case "Map":
    case "WithFallbackConfig":
      return argEntries(a["args"] as Node, fallback)
    case "WithDefault":
      return argEntries(a["args"] as Node, shown(a["fallback"]))
    case "Variadic":
      return argEntries(a["args"] as Node, fallback).map((e) => ({ ...e, label: `${e.label}...` }))
    default:
      return []
  }
}

/** Wraps text to the width, every line after the first indented by `indent`. */
const wrap = (text: string, indent: number, first: number): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  let room = Width - first
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > room) {
      lines.push(line)
      line = word
      room = Width - indent
    } else line = line === "" ? word : `${line} ${word}`
  }
  lines.push(line)
  return lines.map((l, i) => (i === 0 ? l : `${" ".repeat(indent)}${l}`))
}

/** A two-column table: label, then its description wrapped beside it (or below a long label). */
export const table = (entries: ReadonlyArray<Entry>): Array<string> => {
  const col = Math.min(28, Math.max(0, ...entries.map((e) => e.label.length)) + 4)
  return entries.flatMap((e) => {
    const label = `  ${e.label}`
    if (label.length + 2 > col) return [label, `${" ".repeat(col)}${wrap(e.description, col, col).join("\n")}`]
    return [`${label.padEnd(col)}${wrap(e.description, col, col).join("\n")}`]
  })
}

/** Options every command takes (main.ts handles them before parsing). */
export const globalOptions: ReadonlyArray<Entry> = [
  { label: "--server URL", description: "NATS server (default: NATS_URL, else the context's, else nats://127.0.0.1:4322)" },
  { label: "--context NAME", description: "saved context to use (default: WK_CONTEXT, else the one `wk context use` chose)" },
  { label: "-h, --help", description: "show this help" }
]

/** The descriptor under a command (Map wrappers removed). */
const unwrap = (d: Node): Node => (d._tag === "Map" ? unwrap(d["command"] as Node) : d)

/** The descriptor of a built command. */
export const descriptorOf = (command: Command.Command<string, never, unknown, unknown>): Node => unwrap((command as unknown as { descriptor: Node }).descriptor)

/** A descriptor's name and one-line description. */
export const summaryOf = (d: Node): { name: string; description: string } => {
  const s = d._tag === "Subcommands" ? unwrap(d["parent"] as Node) : d
  return { name: String(s["name"]), description: plain(s["description"]) }
}

/** The child descriptors of a command group, by name. */
export const childrenOf = (d: Node): Array<Node> => (d._tag === "Subcommands" ? (d["children"] as ReadonlyArray<Node>).map(unwrap) : [])

/** The help text of one command; `path` is its full name (for example `wk held ls`). */
export const helpText = (d: Node, path: string): string => {
  const self = d._tag === "Subcommands" ? unwrap(d["parent"] as Node) : d
  const { description } = summaryOf(d)
  const options = optionEntries(self["options"] as Node)
  const args = argEntries(self["args"] as Node)
  const children = childrenOf(d)
  const usage = `Usage: ${path}${children.length > 0 ? " <command>" : ""}${options.length > 0 ? " [options]" : ""}${args.map((a) => ` ${a.label}`).join("")}`
  return [
    ...wrap(usage, 7, 0),
    "",
    ...wrap(description, 0, 0),
    ...(children.length > 0 ? ["", "Commands:", ...table(children.map((c) => ({ label: summaryOf(c).name, description: summaryOf(c).description })))] : []),
    ...(args.length > 0 ? ["", "Arguments:", ...table(args)] : []),
    ...(options.length > 0 ? ["", "Options:", ...table(options)] : []),
    "",
    "Global options:",
    ...table(globalOptions),
    ...(children.length > 0 ? ["", `Run \`${path} <command> --help\` for a command's options.`] : [])
  ].join("\n")
}
