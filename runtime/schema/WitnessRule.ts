import { Schema } from "effect"

/**
 * A witness rule, as data. Leaves name a witness class (with an optional count of distinct
 * principals) or one named principal; inner nodes combine with all / any / quorum(n).
 */
export type WitnessRule =
  | { readonly class: string; readonly count?: number }
  | { readonly principal: string }
  | { readonly all: ReadonlyArray<WitnessRule> }
  | { readonly any: ReadonlyArray<WitnessRule> }
  | { readonly quorum: { readonly n: number; readonly of: ReadonlyArray<WitnessRule> } }

const Count = Schema.Int.pipe(Schema.between(1, 100))

export const WitnessRule: Schema.Schema<WitnessRule> = Schema.Union(
  Schema.Struct({ class: Schema.String.pipe(Schema.minLength(1)), count: Schema.optional(Count) }),
  Schema.Struct({ principal: Schema.String.pipe(Schema.minLength(1)) }),
  Schema.Struct({ all: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }),
  Schema.Struct({ any: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }),
  Schema.Struct({ quorum: Schema.Struct({ n: Count, of: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }) })
)

