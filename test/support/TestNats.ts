import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startNatsServer, type RunningNats } from "../../runtime/cli/EmbeddedNats.js"
import { defaultConfig } from "../../runtime/cli/Paths.js"

/** Dev credentials of each role in nats.conf. */
export const Roles = {
  kernel: { user: "kernel", pass: "kernel-dev" },
  agent: { user: "agent", pass: "agent-dev" },
  witness: { user: "witness", pass: "witness-dev" },
  tool: { user: "tool", pass: "tool-dev" },
  gateway: { user: "gateway", pass: "gateway-dev" },
  auditor: { user: "auditor", pass: "auditor-dev" },
  /** Agents confined to their own session namespace (`alice.*`, `bob.*`). */
  alice: { user: "agent-alice", pass: "alice-dev" },
  bob: { user: "agent-bob", pass: "bob-dev" }
} as const

export interface TestNats extends RunningNats {
  readonly servers: string
  readonly storeDir: string
  /** Stops the server, keeping the store (a restart sees the same data). */
  readonly restart: () => Promise<TestNats>
  /** Stops the server and removes its store. */
  readonly dispose: () => Promise<void>
}

/** Starts a nats-server of our own from nats.conf, on a free port, with a temporary store. */
export const startTestNats = async (storeDir = mkdtempSync(join(tmpdir(), "wk-nats-")), port?: number): Promise<TestNats> => {
  const s = await startNatsServer({ config: defaultConfig, storeDir, ...(port ? { port } : {}) })
  const t: TestNats = {
    ...s,
    servers: `127.0.0.1:${s.port}`,
    storeDir,
    restart: async () => {
      await s.stop()
      return startTestNats(storeDir, s.port)
    },
    dispose: async () => {
      await s.stop()
      rmSync(storeDir, { recursive: true, force: true })
    }
  }
  return t
}
