import { Either, ParseResult, Schema } from "effect"
import { readFileSync, renameSync, writeFileSync } from "node:fs"
import { hintsOf, type GovernedTool } from "./Upstreams.js"

/** An upstream tool as the agent side lists it: everything but the way to call it. */
export type ListedTool = Omit<GovernedTool, "call">

/** One catalog entry: what `tools/list` shows of a governed tool (no credentials, no way to call it). */
const CatalogTool = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_]{0,99}$/, { message: () => "a governed tool name is a lowercase token" })),
  server: Schema.String,
  upstream_name: Schema.String,
  description: Schema.String,
  input_schema: Schema.Struct({ type: Schema.Literal("object") }, Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  annotations: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

/**
 * The tool catalog the bridge writes (`catalog` in its config) and the agent-side `wk mcp` reads
 * (`catalog` in its config, instead of `servers`): the agent lists the tools without starting or
 * reaching the upstreams, which only the bridge's user can.
 */
export const ToolCatalog = Schema.Struct({ tools: Schema.Array(CatalogTool) })

/** Writes the catalog of `tools` to `path` (whole or not at all). */
export const writeCatalog = (path: string, tools: ReadonlyArray<ListedTool>): void => {
  const doc = { tools: tools.map((t) => ({ name: t.name, server: t.server, upstream_name: t.upstreamName, description: t.description, input_schema: t.inputSchema, ...(t.annotations !== undefined ? { annotations: t.annotations } : {}) })) }
  writeFileSync(`${path}.tmp`, JSON.stringify(doc, null, 2), { mode: 0o644 })
  renameSync(`${path}.tmp`, path)
}

/** The tools of the catalog at `path`, or one line naming what is wrong. */
export const readCatalog = (path: string): Either.Either<ReadonlyArray<ListedTool>, string> => {
  let json: unknown
  try {
    json = JSON.parse(readFileSync(path, "utf8"))
  } catch (e) {
    return Either.left(`cannot read the tool catalog ${path}: ${e instanceof Error ? e.message : String(e)} (the bridge writes it: catalog in wk-bridge.json)`)
  }
  return Schema.decodeUnknownEither(ToolCatalog)(json).pipe(
    Either.mapLeft((e) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(e)[0]
      return `${path}: ${issue === undefined ? e.message : `${issue.path.join(".")}: ${issue.message}`}`
    }),
    Either.map((c) =>
      c.tools.map((t): ListedTool => {
        const annotations = t.annotations as ListedTool["annotations"]
        return { name: t.name, server: t.server, upstreamName: t.upstream_name, description: t.description, inputSchema: t.input_schema as ListedTool["inputSchema"], annotations, hints: hintsOf(annotations) }
      })
    )
  )
}
