import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { jetstreamManager, StorageType } from "@nats-io/jetstream"
import { freePort, startNatsServer, type RunningNats } from "../../runtime/cli/EmbeddedNats.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Roles } from "./TestNats.js"
import { eventually } from "./Stream.js"

/** The cluster variant of nats.conf (it includes nats.conf and adds the cluster block). */
export const clusterConfig = join(repoRoot, "test/chaos/cluster/nats-cluster.conf")
export const ClusterName = "wk-cluster"

export interface ClusterNode {
  readonly name: string
  /** Client port. */
  readonly port: number
  /** Route (cluster) port. */
  readonly clusterPort: number
  /** `127.0.0.1:PORT`, for one node only. */
  readonly servers: string
  readonly storeDir: string
  /** The current process (changes on restart); 0 while the node is killed. */
  readonly pid: number
}

export interface TestCluster {
  readonly nodes: ReadonlyArray<ClusterNode>
  /** Every node's address, comma-separated (`127.0.0.1:P1,127.0.0.1:P2,...`). */
  readonly servers: string
  /** Whether node i is running. */
  readonly alive: (i: number) => boolean
  /** SIGKILL node i and wait until it has exited (its store stays). */
  readonly kill: (i: number) => Promise<void>
  /** Starts node i again with the same name, ports and store; resolves once it accepts clients and JetStream answers through it. */
  readonly restart: (i: number) => Promise<void>
  /** Resolves once every named stream has a leader and all its replicas are current (none offline). */
  readonly waitCurrent: (streams: ReadonlyArray<string>, timeoutMs?: number) => Promise<void>
  /** The last lines a node logged (for failures). */
  readonly log: (i: number) => string
  /** Stops every node and removes the stores. */
  readonly dispose: () => Promise<void>
}


/** A kernel-role connection to exactly these servers (no cluster discovery, no reconnect). */
const kernelConn = (servers: string | Array<string>): Promise<NatsConnection> =>
  connect({ servers, ...Roles.kernel, name: "test-cluster probe", ignoreClusterUpdates: true, maxReconnectAttempts: 0, timeout: 2000 })

/** Polls `step` until it resolves, or fails with the last error after `timeoutMs`. */
const retry = (what: string, timeoutMs: number, step: () => Promise<void>): Promise<void> =>
  eventually(async () => (await step(), true), timeoutMs, 250).then(
    () => undefined,
    (e: unknown) => {
      throw new Error(`${what} not ready: ${String(e)}`)
    }
  )

/** JetStream answers through `servers`; with `probeReplicas`, a stream of that many replicas can be created. */
const jetStreamReady = async (servers: string | Array<string>, probeReplicas?: number): Promise<void> => {
  const nc = await kernelConn(servers)
  try {
    const jsm = await jetstreamManager(nc, { timeout: 3000 })
    await jsm.getAccountInfo()
    if (probeReplicas !== undefined) {
      const name = `WK_CLUSTER_PROBE_${process.pid}`
      await jsm.streams.add({ name, subjects: [`wk.test.cluster-probe.${process.pid}`], num_replicas: probeReplicas, storage: StorageType.Memory })
      await jsm.streams.delete(name)
    }
  } finally {
    await nc.close().catch(() => undefined)
  }
}

/**
 * Starts `size` nats-server processes from the cluster config on free loopback ports, each with
 * its own temporary store and routes to all the others, and resolves once the JetStream
 * meta-leader is elected and a stream with `size` replicas can be created.
 */
export const startTestCluster = async (size = 3): Promise<TestCluster> => {
  const root = mkdtempSync(join(tmpdir(), "wk-cluster-"))
  const ports = await Promise.all(Array.from({ length: size * 2 }, () => freePort()))
  const nodes = Array.from({ length: size }, (_, i) => ({
    name: `wk-n${i}`,
    port: ports[2 * i]!,
    clusterPort: ports[2 * i + 1]!,
    servers: `127.0.0.1:${ports[2 * i]!}`,
    storeDir: join(root, `n${i}`),
    pid: 0
  }))
  const routes = nodes.map((n) => `nats://127.0.0.1:${n.clusterPort}`).join(",")
  const running: Array<RunningNats | null> = nodes.map(() => null)
  const logs: Array<string> = nodes.map(() => "")

  const launch = async (i: number): Promise<void> => {
    const n = nodes[i]!
    const s = await startNatsServer({
      config: clusterConfig,
      storeDir: n.storeDir,
      port: n.port,
      extraArgs: ["-n", n.name, "--cluster_name", ClusterName, "--cluster", `nats://127.0.0.1:${n.clusterPort}`, "--routes", routes]
    })
    logs[i] = ""
    const keep = (d: Buffer) => (logs[i] = (logs[i] + d.toString()).slice(-20_000))
    s.child.stdout!.on("data", keep)
    s.child.stderr!.on("data", keep)
    running[i] = s
    n.pid = s.pid
  }

  const alive = (i: number) => {
    const s = running[i]
    return s !== null && s !== undefined && s.child.exitCode === null && s.child.signalCode === null
  }

  const kill = async (i: number): Promise<void> => {
    const s = running[i]
    if (s === null || s === undefined) return
    if (alive(i)) {
      const exited = new Promise<void>((r) => s.child.once("exit", () => r()))
      process.kill(s.pid, "SIGKILL")
      await exited
    }
    running[i] = null
    nodes[i]!.pid = 0
  }

  const stopAll = async () => Promise.all(running.map((s) => s?.stop()))

  try {
    await Promise.all(nodes.map((_, i) => launch(i)))
    await retry("JetStream cluster", 30_000, () => jetStreamReady(nodes.map((n) => n.servers), size))
  } catch (e) {
    await stopAll()
    rmSync(root, { recursive: true, force: true })
    throw e
  }

  return {
    nodes,
    servers: nodes.map((n) => n.servers).join(","),
    alive,
    kill,
    restart: async (i) => {
      if (alive(i)) await kill(i)
      await launch(i)
      // Through this node only: it is routed to the others and JetStream (the meta-leader) answers.
      await retry(`node ${nodes[i]!.name}`, 30_000, () => jetStreamReady(nodes[i]!.servers))
    },
    waitCurrent: (streams, timeoutMs = 30_000) =>
      retry(`replicas of ${streams.join(", ")}`, timeoutMs, async () => {
        const nc = await kernelConn(nodes.filter((_, i) => alive(i)).map((n) => n.servers))
        try {
          const jsm = await jetstreamManager(nc, { timeout: 3000 })
          for (const name of streams) {
            const si = await jsm.streams.info(name)
            const c = si.cluster
            const replicas = c?.replicas ?? []
            const bad = replicas.filter((r) => !r.current || r.offline === true)
            if (c?.leader === undefined || replicas.length !== si.config.num_replicas - 1 || bad.length > 0) {
              throw new Error(`${name}: leader ${c?.leader ?? "none"}, replicas ${JSON.stringify(replicas)}`)
            }
          }
        } finally {
          await nc.close().catch(() => undefined)
        }
      }),
    log: (i) => logs[i] ?? "",
    dispose: async () => {
      await stopAll()
      running.fill(null)
      rmSync(root, { recursive: true, force: true })
    }
  }
}
