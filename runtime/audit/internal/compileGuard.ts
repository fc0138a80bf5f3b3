import { Option, Schema, SchemaAST as AST } from "effect"

type Guard = (u: unknown) => boolean

/**
 * Compiles a schema's AST into a plain predicate equivalent to `Schema.is(schema)` for the node
 * kinds plain data schemas use (structs, records, arrays, unions, literals, primitives,
 * refinements, recursion). Anything else falls back to `Schema.is` for that subtree, so the
 * guard never accepts what the schema rejects. About 10x faster than `Schema.is` on events.
 */
export const compileGuard = <A, I>(schema: Schema.Schema<A, I, never>): ((u: unknown) => u is A) => compile(schema.ast) as (u: unknown) => u is A

/**
 * The predicate of one of Schema's own filters (`int`, `pattern`, `minLength`, `maxLength`),
 * read from its annotations, to skip the generic filter's issue machinery; undefined otherwise.
 * Only applied after the refined type's own guard (a number, a string) has passed.
 */
const knownFilter = (ast: AST.Refinement): Guard | undefined => {
  const id = ast.annotations[AST.SchemaIdAnnotationId]
  const json = ast.annotations[AST.JSONSchemaAnnotationId] as Record<string, unknown> | undefined
  if (id === Schema.IntSchemaId) return (u) => Number.isSafeInteger(u)
  if (id === Schema.PatternSchemaId) {
    const regex = (ast.annotations[Schema.PatternSchemaId] as { regex?: unknown } | undefined)?.regex
    if (!(regex instanceof RegExp)) return undefined
    return (u) => {
      regex.lastIndex = 0
      return regex.test(u as string)
    }
  }
  if (id === Schema.MaxLengthSchemaId && typeof json?.["maxLength"] === "number") {
    const max = json["maxLength"]
    return (u) => (u as string).length <= max
  }
  if (id === Schema.MinLengthSchemaId && typeof json?.["minLength"] === "number") {
    const min = json["minLength"]
    return (u) => (u as string).length >= min
  }
  return undefined
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const compile = (ast: AST.AST): Guard => {
  switch (ast._tag) {
    case "StringKeyword":
      return (u) => typeof u === "string"
    case "NumberKeyword":
      return (u) => typeof u === "number"
    case "BooleanKeyword":
      return (u) => typeof u === "boolean"
    case "UndefinedKeyword":
      return (u) => u === undefined
    case "UnknownKeyword":
    case "AnyKeyword":
      return () => true
    case "Literal": {
      const v = ast.literal
      return (u) => u === v
    }
    case "Refinement": {
      const from = compile(ast.from)
      const known = knownFilter(ast)
      if (known !== undefined) return (u) => from(u) && known(u)
      return (u) => from(u) && Option.isNone(ast.filter(u, {}, ast))
    }
    case "Suspend": {
      let inner: Guard | undefined
      return (u) => (inner ??= compile(ast.f()))(u)
    }
    case "Union": {
      const members = ast.types.map(compile)
      // Every member a struct with a literal `type`: one lookup instead of trying each member.
      const tags = ast.types.map((t) => (t._tag === "TypeLiteral" ? t.propertySignatures.find((p) => p.name === "type" && !p.isOptional)?.type : undefined))
      if (tags.every((t) => t?._tag === "Literal") && new Set(tags.map((t) => (t as AST.Literal).literal)).size === tags.length) {
        const byTag = new Map(tags.map((t, i) => [(t as AST.Literal).literal, members[i]!]))
        return (u) => isRecord(u) && (byTag.get(u["type"] as AST.LiteralValue)?.(u) ?? false)
      }
      return (u) => {
        for (const m of members) if (m(u)) return true
        return false
      }
    }
    case "TupleType": {
      if (ast.elements.length > 0 || ast.rest.length !== 1) break
      const item = compile(ast.rest[0]!.type)
      return (u) => Array.isArray(u) && u.every(item)
    }
    case "TypeLiteral": {
      if (ast.indexSignatures.length === 1 && ast.propertySignatures.length === 0) {
        const sig = ast.indexSignatures[0]!
        if (sig.parameter._tag !== "StringKeyword") break
        const value = compile(sig.type)
        return (u) => {
          if (!isRecord(u)) return false
          for (const k in u) if (!value(u[k])) return false
          return true
        }
      }
      if (ast.indexSignatures.length > 0) break
      const props = ast.propertySignatures.map((p) => ({ name: p.name as string, optional: p.isOptional, guard: compile(p.type) }))
      if (ast.propertySignatures.some((p) => typeof p.name !== "string")) break
      return (u) => {
        if (!isRecord(u)) return false
        for (const p of props) {
          const v = u[p.name]
          if (v === undefined) {
            if (!p.optional) return false
          } else if (!p.guard(v)) return false
        }
        return true
      }
    }
    default:
      break
  }
  return Schema.is(Schema.make(ast)) as Guard
}
