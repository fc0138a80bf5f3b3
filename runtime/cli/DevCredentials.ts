import { readFileSync } from "node:fs"
import { join } from "node:path"
import { devPublicKey } from "../client/DevKeys.js"
import type { Profile } from "../schema/Profile.js"
import { repoRoot } from "./Paths.js"

/**
 * The public key of the plugin signer whose secret key is committed (plugins/dev-signer.key.json):
 * anyone can sign a plugin with it.
 */
export const devSignerPublicKey = (): string | null => {
  try {
    const key = JSON.parse(readFileSync(join(repoRoot, "plugins", "dev-signer.key.json"), "utf8")) as { public_key?: unknown }
    return typeof key.public_key === "string" ? key.public_key : null
  } catch {
    return null
  }
}

/** Whether a NATS password is one of nats.conf's development passwords (`kernel-dev`, `agent-dev`, ...). */
export const isDevPassword = (pass: string | undefined): boolean => pass !== undefined && pass.endsWith("-dev")

/**
 * Every development credential a kernel would trust or use, one line each: principal keys
 * anyone can derive (runtime/client/DevKeys.ts, from any registered principal name), plugins
 * pinned to the committed dev signer, and `*-dev` NATS passwords. Empty when there are none.
 */
export const devCredentialsIn = (profiles: ReadonlyArray<Profile>, nats: ReadonlyArray<{ readonly user: string; readonly pass: string | undefined }>): ReadonlyArray<string> => {
  const found: Array<string> = []
  const names = new Set(profiles.flatMap((p) => Object.keys(p.principals ?? {})))
  const derivable = new Map([...names].map((n) => [devPublicKey(n), n]))
  for (const p of profiles) {
    for (const [principal, entry] of Object.entries(p.principals ?? {})) {
      for (const key of entry.keys) {
        const of = derivable.get(key)
        if (of !== undefined) found.push(`profile '${p.name}' registers the dev key of '${of}' for principal '${principal}'`)
      }
    }
  }
  const signer = devSignerPublicKey()
  for (const p of profiles) {
    for (const pin of p.plugins ?? []) {
      if (pin.signer === signer) found.push(`profile '${p.name}' pins plugin '${pin.name}' signed by the committed dev signer (plugins/dev-signer.key.json)`)
    }
  }
  for (const c of nats) if (isDevPassword(c.pass)) found.push(`NATS user '${c.user}' uses a development password (nats.conf '*-dev')`)
  return found
}
