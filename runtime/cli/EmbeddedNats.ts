import { spawn, type ChildProcess } from "node:child_process"
import { accessSync, constants, mkdirSync } from "node:fs"
import { createServer } from "node:net"
import { delimiter, join } from "node:path"

/** Finds `nats-server` on PATH (or Debian's /usr/sbin), or null. */
export const findNatsServer = (): string | null => {
  const dirs = [...(process.env["PATH"] ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/usr/local/bin"]
  for (const d of dirs) {
    const candidate = join(d, "nats-server")
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // keep looking
    }
  }
  return null
}

export const MissingNatsServer =
  "nats-server not found on PATH: install it with `apt-get install -y nats-server` or from https://github.com/nats-io/nats-server/releases, or set NATS_URL to an existing server"

/** A free TCP port on loopback. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer()
    s.unref()
    s.on("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address()
      s.close(() => (typeof addr === "object" && addr !== null ? resolve(addr.port) : reject(new Error("no port"))))
    })
  })

/** Whether something already listens on a loopback port. */
export const portInUse = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = createServer()
    s.once("error", () => resolve(true))
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(false)))
  })

export interface RunningNats {
  readonly url: string
  readonly port: number
  readonly pid: number
  readonly child: ChildProcess
  readonly stop: () => Promise<void>
}

/**
 * Starts nats-server from a config file with its own store directory; resolves once it accepts
 * clients. `storeDirInConfig`: the config names the store itself (`store_dir`), so `-sd` is left
 * out (nats-server refuses both, and reloads only a config that names it: LocalNatsUsers.ts).
 */
export const startNatsServer = async (opts: { config: string; storeDir: string; port?: number; binary?: string; extraArgs?: ReadonlyArray<string>; storeDirInConfig?: boolean }): Promise<RunningNats> => {
  const binary = opts.binary ?? findNatsServer()
  if (binary === null) throw new Error(MissingNatsServer)
  const port = opts.port ?? (await freePort())
  mkdirSync(opts.storeDir, { recursive: true })
  const child = spawn(binary, ["-c", opts.config, "-p", String(port), ...(opts.storeDirInConfig === true ? [] : ["-sd", opts.storeDir]), ...(opts.extraArgs ?? [])], { stdio: ["ignore", "pipe", "pipe"] })
  let log = ""
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      log += d.toString()
      if (log.includes("Server is ready")) resolve()
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`nats-server exited with code ${code}:\n${log.slice(-2000)}`)))
    setTimeout(() => reject(new Error(`nats-server did not become ready in 10 s:\n${log.slice(-2000)}`)), 10_000).unref()
  })
  child.stdout!.resume()
  child.stderr!.resume()
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      child.once("exit", () => resolve())
      child.kill("SIGTERM")
      setTimeout(() => child.kill("SIGKILL"), 5000).unref()
    })
  return { url: `nats://127.0.0.1:${port}`, port, pid: child.pid!, child, stop }
}
