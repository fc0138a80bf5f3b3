import { describe, expect, it } from "vitest"
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parse } from "yaml"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { findNatsServer } from "../../runtime/cli/EmbeddedNats.js"

// The deployment files in docs/deploy checked with what installs here: the compose file parsed
// and its topology asserted (3 JetStream nodes, provisioning as its own user before two kernels,
// the gateway), the node config tested by nats-server itself, the systemd units by
// systemd-analyze, and every file the Dockerfile copies present. The same topology runs for real
// in test/chaos/Cluster.test.ts with the processes the tests start.
const deploy = join(repoRoot, "docs", "deploy")

interface Service {
  readonly image?: string
  readonly command?: ReadonlyArray<string>
  readonly environment?: Record<string, string>
  readonly depends_on?: Record<string, { readonly condition: string }>
  readonly volumes?: ReadonlyArray<string>
  readonly ports?: ReadonlyArray<string>
  readonly healthcheck?: { readonly test: ReadonlyArray<string> }
}
// Compose resolves YAML merge keys (`<<: *anchor`), so the parse does too.
const compose = parse(readFileSync(join(deploy, "compose.yaml"), "utf8"), { merge: true }) as { services: Record<string, Service>; volumes: Record<string, unknown> }

describe("docs/deploy/compose.yaml", () => {
  it("runs three JetStream nodes, provisioning, two kernels and the gateway", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["gateway", "kernel-a", "kernel-b", "nats-1", "nats-2", "nats-3", "provision"])
    for (const n of ["nats-1", "nats-2", "nats-3"]) {
      const s = compose.services[n]!
      expect(s.command).toEqual(["-c", "/etc/nats/nats-node.conf", "--server_name", n])
      expect(s.volumes).toContain(`${n}:/data`)
      expect(Object.keys(compose.volumes)).toContain(n)
    }
  })

  it("provisions as the provisioner user, then runs the kernels as the kernel user on every node, replicated 3 ways", () => {
    const p = compose.services["provision"]!
    expect(p.command).toEqual(["provision"])
    expect(p.environment!["NATS_URL"]).toMatch(/^nats:\/\/provisioner:[^@]+@nats-1:4222,nats-2:4222,nats-3:4222$/)
    for (const k of ["kernel-a", "kernel-b"]) {
      const s = compose.services[k]!
      expect(s.command?.[0]).toBe("kernel")
      expect(s.environment!["NATS_URL"]).toMatch(/^nats:\/\/kernel:[^@]+@/)
      expect(s.environment!["NATS_URL"]!.split("@")[1]!.split(",").map((h) => h.split(":")[0]).sort()).toEqual(["nats-1", "nats-2", "nats-3"])
      expect(s.environment).toMatchObject({ WK_REPLICAS: "3", WK_KERNEL_KEY: "/keys/kernel.key" })
      expect(s.depends_on).toMatchObject({ provision: { condition: "service_completed_successfully" } })
    }
    expect(compose.services["gateway"]!.environment).toMatchObject({ WK_GATEWAY_NATS_USER: "gateway" })
  })

  it("publishes each kernel's metrics port bound on every address, ready by /readyz, and the gateway's metrics on a port of their own", () => {
    for (const k of ["kernel-a", "kernel-b"]) {
      const s = compose.services[k]!
      expect(s.environment).toMatchObject({ WK_METRICS_PORT: "9464", WK_METRICS_HOST: "0.0.0.0" })
      expect(s.ports?.some((p) => p.endsWith(":9464"))).toBe(true)
      expect(s.healthcheck?.test.join(" ")).toContain("http://127.0.0.1:9464/readyz")
    }
    const g = compose.services["gateway"]!
    const flag = (name: string) => g.command![g.command!.indexOf(name) + 1]
    expect([flag("--port"), flag("--metrics-port"), flag("--metrics-host")]).toEqual(["8787", "9466", "0.0.0.0"])
    expect(g.ports).toEqual(["8787:8787", "9466:9466"])
    expect(g.depends_on).toMatchObject({ "kernel-a": { condition: "service_healthy" }, "kernel-b": { condition: "service_healthy" } })
  })

  it("the node config is valid for nats-server (-t) and routes to the three services", () => {
    const conf = readFileSync(join(deploy, "nats", "nats-node.conf"), "utf8")
    for (const n of ["nats-1", "nats-2", "nats-3"]) expect(conf).toContain(`nats://${n}:6222`)
    const bin = findNatsServer()
    if (bin === null) return
    const dir = mkdtempSync(join(tmpdir(), "wk-deploy-"))
    writeFileSync(join(dir, "nats-node.conf"), conf.replace('store_dir: "/data"', `store_dir: "${join(dir, "data")}"`))
    copyFileSync(join(repoRoot, "nats.conf"), join(dir, "nats.conf"))
    const r = spawnSync(bin, ["-t", "-c", join(dir, "nats-node.conf")], { encoding: "utf8" })
    expect(r.status, r.stderr + r.stdout).toBe(0)
  })
})

describe("docs/deploy/systemd", () => {
  const units = readdirSync(join(deploy, "systemd")).filter((f) => f.endsWith(".service"))
  const analyze = spawnSync("systemd-analyze", ["--version"]).status === 0
  it("has the provisioning, kernel (template), gateway and governed MCP endpoint units", () => {
    expect(units.sort()).toEqual(["wk-gateway.service", "wk-kernel@.service", "wk-mcp-http.service", "wk-provision.service"])
    const kernel = readFileSync(join(deploy, "systemd", "wk-kernel@.service"), "utf8")
    expect(kernel).toMatch(/^Requires=wk-provision\.service$/m)
    expect(kernel).toMatch(/^KillSignal=SIGINT$/m)
    expect(kernel).toMatch(/^Environment=WK_METRICS_HOST=0\.0\.0\.0$/m)
    const gateway = readFileSync(join(deploy, "systemd", "wk-gateway.service"), "utf8")
    expect(gateway).toMatch(/^ExecStart=.* gateway --host 0\.0\.0\.0 --port 8787 --metrics-host 0\.0\.0\.0 --metrics-port 9466$/m)
    const mcp = readFileSync(join(deploy, "systemd", "wk-mcp-http.service"), "utf8")
    expect(mcp).toMatch(/^ExecStart=.* mcp serve --http --config \S+$/m)
  })
  it.skipIf(!analyze)("every unit passes systemd-analyze verify (a broken one does not)", () => {
    for (const u of units) {
      const path = join(deploy, "systemd", u.replace("@.service", "@a.service"))
      const r = spawnSync("systemd-analyze", ["verify", "--man=no", path], { encoding: "utf8" })
      expect(r.status, `${u}: ${r.stderr}`).toBe(0)
    }
    const dir = mkdtempSync(join(tmpdir(), "wk-units-"))
    writeFileSync(join(dir, "broken.service"), "[Service]\nExecStart=not-an-absolute-path\n")
    expect(spawnSync("systemd-analyze", ["verify", "--man=no", join(dir, "broken.service")]).status).not.toBe(0)
  })
})

describe("docs/deploy/Dockerfile", () => {
  it("copies only files the repository has, and runs wk", () => {
    const lines = readFileSync(join(deploy, "Dockerfile"), "utf8").split("\n")
    const sources = lines.filter((l) => l.startsWith("COPY ") && !l.includes("--from=")).flatMap((l) => l.slice(5).trim().split(/\s+/).slice(0, -1))
    expect(sources.length).toBeGreaterThan(5)
    for (const s of sources) expect(existsSync(join(repoRoot, s)), s).toBe(true)
    expect(lines).toContain('ENTRYPOINT ["node", "runtime/cli/wk.mjs"]')
  })
})
