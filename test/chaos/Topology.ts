import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startTestNats, type TestNats } from "../support/TestNats.js"

/**
 * Where the soak's NATS lives, and the one NATS fault it can inject: a single server that is
 * SIGKILLed and restarted on the same port and file store, or (cluster) one node of three.
 */
export interface Topology {
  readonly name: string
  /** Every server address, comma-separated (clients fail over across them). */
  readonly servers: string
  /** The address kernel `i` connects to (cluster: a different node per kernel). */
  readonly kernelServers: (i: number) => string
  /** Replicas for the kernel's streams and buckets. */
  readonly replicas: number
  /** Kills NATS (or one node), brings it back; resolves once it serves again, with a description. */
  readonly fault: () => Promise<string>
  readonly dispose: () => Promise<void>
}

const exited = (pid: number): Promise<void> =>
  new Promise((resolve) => {
    const poll = () => {
      try {
        process.kill(pid, 0)
        setTimeout(poll, 20)
      } catch {
        resolve()
      }
    }
    poll()
  })

/** One nats-server from nats.conf with a file store; a fault is SIGKILL and a restart on the same store. */
export const singleServer = async (): Promise<Topology> => {
  const storeDir = mkdtempSync(join(tmpdir(), "wk-chaos-nats-"))
  let nats: TestNats = await startTestNats(storeDir)
  const port = nats.port
  return {
    name: "single nats-server",
    servers: nats.servers,
    kernelServers: () => nats.servers,
    replicas: 1,
    fault: async () => {
      const pid = nats.pid
      process.kill(pid, "SIGKILL")
      await exited(pid)
      // Down for a moment, as a crashed server under a supervisor would be.
      await new Promise((r) => setTimeout(r, 500))
      nats = await startTestNats(storeDir, port)
      return `nats-server SIGKILLed and restarted (pid ${pid} -> ${nats.pid})`
    },
    dispose: async () => {
      await nats.stop()
      rmSync(storeDir, { recursive: true, force: true })
    }
  }
}
