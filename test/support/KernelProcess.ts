import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import type { Profile } from "../../runtime/schema/Profile.js"

export interface KernelProcess {
  readonly child: ChildProcess
  readonly pid: number
  /** SIGKILL: no drain, no finalizers, exactly a crash. */
  readonly kill: () => Promise<void>
  /**
   * SIGINT: the clean Ctrl-C path. A process still running after `StopGraceMs` (a node flag or
   * `--import` hook that keeps its own SIGINT listener) is killed, so nothing outlives its caller.
   */
  readonly stop: () => Promise<void>
  readonly output: () => string
}

/** Writes profiles to a temporary directory a kernel process can load. */
export const profileDir = (profiles: ReadonlyArray<Profile>): string => {
  const dir = mkdtempSync(join(tmpdir(), "wk-profiles-"))
  profiles.forEach((p, i) => writeFileSync(join(dir, `${String(i).padStart(2, "0")}-${p.name}.json`), JSON.stringify(p)))
  return dir
}

// A loaded machine can take tens of seconds to start a process that loads Effect and the plugin host.
const StartTimeoutMs = 90_000
// How long a stopped kernel may take to drain before it is killed (a clean stop takes under a second).
const StopGraceMs = 20_000

/** Starts `wk kernel` as its own OS process (through the `wk` binary: the compiled build when it is fresh) against a NATS server; resolves when it is ready. */
export const startKernelProcess = async (servers: string, profilesPath: string, env: Record<string, string> = {}, nodeArgs: ReadonlyArray<string> = []): Promise<KernelProcess> => {
  const child = spawn(process.execPath, [...nodeArgs, "--disable-warning=ExperimentalWarning", join(repoRoot, "runtime/cli/wk.mjs"), "kernel", "--dev", "--profiles", profilesPath], {
    cwd: repoRoot,
    env: { ...process.env, NATS_URL: `nats://kernel:kernel-dev@${servers}`, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()))
  await new Promise<void>((resolve, reject) => {
    // A kernel that is not ready in time is killed: left running, it would serve unaccounted for.
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`kernel did not start in ${StartTimeoutMs / 1000} s:\n${out}`))
    }, StartTimeoutMs)
    const check = () => {
      if (out.includes("Witness Kernel ready")) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stdout!.on("data", check)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`kernel exited with ${code}:\n${out}`))
    })
  })
  const exited = new Promise<void>((r) => child.once("exit", () => r()))
  const gone = () => child.exitCode !== null || child.signalCode !== null
  return {
    child,
    pid: child.pid!,
    kill: async () => {
      if (!gone()) child.kill("SIGKILL")
      await exited
    },
    stop: async () => {
      if (!gone()) child.kill("SIGINT")
      const late = setTimeout(() => gone() || child.kill("SIGKILL"), StopGraceMs)
      await exited
      clearTimeout(late)
    },
    output: () => out
  }
}

/**
 * SIGKILLs a kernel 20 ms from now: a crash "right after the tool saw the request". The kernel
 * writes what it answers in the same event-loop turn as the tool request, possibly as that turn
 * ends (ledger/CoalescedWrites.ts), so an answer already decided goes out first; a tool that
 * withholds its reply for longer keeps the effect unrecorded at the crash.
 */
export const killSoon = (k: KernelProcess): void => void setTimeout(() => process.kill(k.pid, "SIGKILL"), 20)
