import { testProfile } from "../test/support/Principals.js"
import { pinOf } from "../test/support/Pins.js"

/**
 * The benchmarked profile: path-canon is scoped to fs_write (its transform is recorded as not in
 * scope for money_transfer, not run); the ALLOW path runs 2 WASM adjudicators
 * (spend-limit and data-egress, both covering money_transfer: spend-limit ALLOWs
 * amount 10, data-egress scans every string argument and finds no source code) and one admission plugin (secret-detect). The held bench (amount 5000) is held by
 * spend-limit and released by one human attestation (spend-limit's contract).
 */
export const benchProfile = () =>
  testProfile({
    rules: {},
    plugins: [
      pinOf("path-canon", { stages: ["transform"], tools: ["fs_write"], config: { workspace: "/ws/project", tools: { fs_write: { fields: ["path"] } } } }),
      pinOf("spend-limit", { stages: ["adjudicate"], config: { rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } } } }),
      pinOf("data-egress", { stages: ["adjudicate"], config: { tools: { money_transfer: { url_field: "to" }, http_post: { url_field: "url" } }, first_party: ["*.corp.example"] } }),
      pinOf("secret-detect", { stages: ["admit"] })
    ]
  })
