import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { killOnExit } from "./KillOnExit.js"

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

/** One nats-server from nats.conf with a file store; a fault is SIGKILL and a restart on the same store. */
export const singleServer = async (): Promise<Topology> => {
  const storeDir = mkdtempSync(join(tmpdir(), "wk-chaos-nats-"))
  let nats: TestNats = await startTestNats(storeDir)
  const port = nats.port
  const unregister = killOnExit(() => [nats.pid])
  return {
    name: "single nats-server",
    servers: nats.servers,
    kernelServers: () => nats.servers,
    replicas: 1,
    fault: async () => {
      const { pid, child } = nats
      const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", r))
      process.kill(pid, "SIGKILL")
      await exited
      // Down for a moment, as a crashed server under a supervisor would be.
      await new Promise((r) => setTimeout(r, 500))
      nats = await startTestNats(storeDir, port)
      return `nats-server SIGKILLed and restarted (pid ${pid} -> ${nats.pid})`
    },
    dispose: async () => {
      unregister()
      await nats.stop()
      rmSync(storeDir, { recursive: true, force: true })
    }
  }
}

/**
 * A 3-node JetStream cluster on loopback (test/chaos/cluster/nats-cluster.conf), streams and
 * buckets with 3 replicas, kernel `i` connected to node `i % 3`; a fault SIGKILLs one node in
 * turn, keeps it down a while, restarts it and waits until every replica is current again.
 */
export const clusterTopology = async (): Promise<Topology> => {
  const { startTestCluster } = await import("../support/TestCluster.js")
  const cluster = await startTestCluster(3)
  let next = 0
  const unregister = killOnExit(() => cluster.nodes.map((n) => n.pid))
  return {
    name: "3-node JetStream cluster",
    servers: cluster.servers,
    kernelServers: (i) => cluster.nodes[i % cluster.nodes.length]!.servers,
    replicas: 3,
    fault: async () => {
      const i = next++ % cluster.nodes.length
      const t0 = Date.now()
      await cluster.kill(i)
      await new Promise((r) => setTimeout(r, 2000))
      await cluster.restart(i)
      await cluster.waitCurrent(["WK_EVENTS", "WK_WAKES", "WK_SESSIONS"], 60_000)
      return `NATS node ${cluster.nodes[i]!.name} SIGKILLed, down 2 s, back and current after ${Date.now() - t0} ms`
    },
    dispose: async () => {
      unregister()
      await cluster.dispose()
    }
  }
}
