import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"
import { eventsOf } from "../support/Stream.js"

// Reserved kernel tools: no transform, alias or grant reaches `kernel_*` except the kernel itself.
// The kernel runs a policy that no loader would accept (a grant of kernel_policy_apply and an
// alias onto it, as a stored policy from before the check could hold): the runtime refuses anyway.
const base = testProfile()
const crafted = {
  ...base,
  grants: { ...base.grants, "agent:mallory": ["pay", "kernel_policy_apply"] },
  plugins: [
    pinOf("tool-alias", { stages: ["transform"], config: { aliases: { pay: "kernel_policy_apply" } } }),
    pinOf("spend-limit", { stages: ["adjudicate"], config: { rules: {} } })
  ]
} as Profile

let nats: TestNats
let kernel: InProcessKernel
const conns: NatsConnection[] = []
let mallory: WitnessClient
let root: WitnessClient

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [crafted])
  const agentConn = await connectAs(nats.servers, "agent")
  // Policy admins speak on the kernel's NATS user (nats.conf); tests observe events there too.
  const adminConn = await connectAs(nats.servers, "kernel")
  conns.push(agentConn, adminConn)
  mallory = clientFor(agentConn, "agent:mallory")
  root = clientFor(adminConn, "admin:root")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("reserved kernel tools", () => {
  it("an alias of a granted tool onto kernel_policy_apply is denied: the agent does not become an admin", async () => {
    // Mallory's own profile change, proposed as the granted tool `pay`.
    const takeover = { ...base, admins: [...(base.admins ?? []), "agent:mallory"] }
    const r = (await mallory.propose({ session_id: "s-kt", turn_id: "t1", call_id: "takeover", tool: "pay", args: { profile: takeover } as never })) as { status: number; outcome?: string; held_id: string; reasons?: Array<{ reason: string }> }
    expect(r).toMatchObject({ status: 403, outcome: "denied" })
    expect(r.reasons?.[0]?.reason).toContain("'kernel_policy_apply' is a reserved kernel tool")
    const events = await eventsOf(conns[1]!, r.held_id)
    expect(events.some((e) => e.type === "effect.dispatched")).toBe(false)
    // Still not an admin: even a narrowing change of its own is denied.
    const narrowing = await mallory.proposePolicy({ ...base, held_ttl_ms: 1000 } as never, "narrow")
    expect(narrowing).toMatchObject({ status: 403, reasons: [{ reason: "principal 'agent:mallory' is not a policy admin" }] })
  })

  it("a profile that aliases a kernel tool is refused naming the field, and nothing is applied", async () => {
    const layer = { name: "alias-layer", layer: "project", plugins: [pinOf("tool-alias", { stages: ["transform"], config: { aliases: { pay: "kernel_policy_apply" } } })] }
    expect(await root.applyPolicy(layer as never)).toMatchObject({ status: 400, error: { code: "invalid_request", path: "payload.profile.plugins.0.config.aliases.pay" } })
  })

  it("a profile that grants a kernel tool is refused naming the field", async () => {
    const grant = { ...base, name: "grant-layer", grants: { "admin:root": ["kernel_policy_apply"] } }
    expect(await root.applyPolicy(grant as never)).toMatchObject({ status: 400, error: { code: "invalid_request", path: "payload.profile.grants.admin:root.0" } })
  })
})
