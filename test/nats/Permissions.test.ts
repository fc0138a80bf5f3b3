import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { connect, errors, nanos, type NatsConnection, type Subscription } from "@nats-io/transport-node"
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { layerNats, Nats, natsOptionsFromUrl } from "../../runtime/ledger/Nats.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { ControllerConsumer } from "../../runtime/ledger/Provision.js"
import { Buckets, Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs } from "../support/Principals.js"
import { eventually } from "../support/Stream.js"
import { readFileSync } from "node:fs"
import { defaultConfig } from "../../runtime/cli/Paths.js"
import { toolUserEntry } from "../../runtime/cli/NatsUsers.js"

/**
 * The permission model of nats.conf, against a real nats-server: every refusal is shown by
 * (a) the server's permissions violation arriving on the restricted connection and (b) a
 * kernel-side observer (subscriber, stream or bucket) seeing nothing, with a positive control
 * proving the observer would have seen it.
 */

type Role = keyof typeof Roles

let own: TestNats | undefined
let servers: string
const conns = new Map<Role, NatsConnection>()
const violations = new Map<Role, Array<InstanceType<typeof errors.PermissionViolationError>>>()
const encoder = new TextEncoder()
let tokenCounter = 0
/** A subject token unique to this run and call, so a shared server never mixes tests. */
const token = () => `perm${process.pid}x${Date.now().toString(36)}x${++tokenCounter}`
const conn = (role: Role) => conns.get(role)!
const kernel = () => conn("kernel")

/** Collects permission violations the server reports on a connection (asynchronous in nats.js v3). */
const watch = async (role: Role, nc: NatsConnection) => {
  const seen: Array<InstanceType<typeof errors.PermissionViolationError>> = []
  violations.set(role, seen)
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" && s.error instanceof errors.PermissionViolationError) seen.push(s.error)
    }
  })()
}

/** A permissions violation, bare or wrapped by a JetStream request (RequestError with a cause). */
const permissionDenied = (e: unknown): boolean => {
  for (let c: unknown = e; c instanceof Error; c = c.cause) if (c instanceof errors.PermissionViolationError) return true
  return false
}

/** Waits until the server has refused `operation` on `subject` for this role's connection. */
const refused = (role: Role, operation: "publish" | "subscription", subject: string) =>
  eventually(async () => violations.get(role)!.find((v) => v.operation === operation && v.subject === subject), 3000, 10)

/** An ephemeral pull consumer on WK_SESSIONS filtered to `subject`: named (the filter in the create subject) or unnamed. */
const sessionReader = async (role: Role, subject: string, named: boolean) => {
  const jsm = await jetstreamManager(conn(role), { timeout: 2000 })
  const ci = await jsm.consumers.add(Streams.sessions, { ...(named ? { name: `r_${token()}` } : {}), filter_subject: subject, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, inactive_threshold: nanos(30_000), mem_storage: true })
  return jetstream(conn(role), { timeout: 3000 }).consumers.get(Streams.sessions, ci.name)
}

/** Durable consumers on WK_SESSIONS (the kernel has none there). */
const durablesOnSessions = async (): Promise<Array<string>> => {
  const out: Array<string> = []
  for await (const c of (await jetstreamManager(kernel())).consumers.list(Streams.sessions)) if (c.config.durable_name !== undefined) out.push(c.name)
  return out
}

/** Subscribes as the kernel and counts what arrives. */
const observe = async (subject: string) => {
  const got: Array<string> = []
  const sub: Subscription = kernel().subscribe(subject, { callback: (_e, m) => { got.push(m.subject) } })
  await kernel().flush()
  return { got, sub }
}

/** Messages stored on one subject of a stream (0 when none). */
const storedOn = async (stream: string, subject: string): Promise<number> => {
  const jsm = await jetstreamManager(kernel())
  const info = await jsm.streams.info(stream, { subjects_filter: subject })
  return info.state.subjects?.[subject] ?? 0
}

/**
 * Publishes as a restricted role and shows nothing arrived: the violation is observed on the
 * restricted connection, a kernel subscriber saw nothing, and the same publish by the kernel
 * does arrive (the observer works).
 */
const expectPublishRefused = async (role: Role, subject: string) => {
  const obs = await observe(subject)
  conn(role).publish(subject, encoder.encode(`{"from":"${role}"}`))
  await conn(role).flush()
  const v = await refused(role, "publish", subject)
  expect(v.message).toMatch(/permissions violation/i)
  kernel().publish(subject, encoder.encode(`{"from":"kernel"}`))
  await eventually(async () => obs.got.length > 0, 3000, 10)
  await kernel().flush()
  expect(obs.got).toEqual([subject])
  obs.sub.unsubscribe()
}

/** Publishes as a role and shows the kernel received it, with no violation reported. */
const expectPublishAllowed = async (role: Role, subject: string) => {
  const obs = await observe(subject)
  conn(role).publish(subject, encoder.encode(`{"from":"${role}"}`))
  await conn(role).flush()
  await eventually(async () => obs.got.length === 1, 3000, 10)
  expect(violations.get(role)!.filter((v) => v.subject === subject)).toEqual([])
  obs.sub.unsubscribe()
}

beforeAll(async () => {
  const external = process.env["WK_TEST_NATS_URL"]
  if (external) {
    servers = [natsOptionsFromUrl(external).servers].flat()[0]!
  } else {
    own = await startTestNats()
    servers = own.servers
  }
  // The kernel's own provisioning: streams and buckets, with kernel credentials.
  await Effect.runPromise(provision().pipe(Effect.provide(layerNats({ servers, ...Roles.kernel, name: "perm-provision" }))))
  for (const role of Object.keys(Roles) as Array<Role>) {
    const nc = await connectAs(servers, role)
    conns.set(role, nc)
    await watch(role, nc)
  }
})

afterAll(async () => {
  await Promise.all([...conns.values()].map((nc) => nc.close()))
  await own?.dispose()
})

describe("agent", () => {
  it("cannot publish events: refused, and nothing reaches a subscriber or WK_EVENTS", async () => {
    const subject = Subjects.events(`h_${token()}`)
    await expectPublishRefused("agent", subject)
    // The kernel's control publish above was a core publish; JetStream stored it, the agent's not.
    expect(await storedOn(Streams.events, subject)).toBe(1)
  })

  it("cannot attest", async () => {
    await expectPublishRefused("agent", Subjects.attest)
  })

  it("cannot invoke a tool", async () => {
    await expectPublishRefused("agent", Subjects.toolInvoke(token()))
  })

  it("cannot publish wakes", async () => {
    await expectPublishRefused("agent", Subjects.wake(`h_${token()}`))
  })

  it("cannot write KV: the facts bucket holds nothing it put", async () => {
    const key = token()
    const subject = `$KV.${Buckets.facts}.${key}`
    conn("agent").publish(subject, encoder.encode(`{"forged":true}`))
    await conn("agent").flush()
    await refused("agent", "publish", subject)
    const kv = await new Kvm(kernel()).open(Buckets.facts)
    expect(await kv.get(key)).toBeNull()
    // Control: the kernel's write lands.
    await kv.put(key, encoder.encode("{}"))
    expect((await kv.get(key))?.operation).toBe("PUT")
    await kv.purge(key)
  })

  it("cannot read WK_EVENTS through the JetStream API", async () => {
    const jsm = await jetstreamManager(conn("agent"), { timeout: 2000 })
    await expect(jsm.direct.getMessage(Streams.events, { last_by_subj: Subjects.events("h_x") })).rejects.toSatisfy(permissionDenied)
  })

  it("cannot subscribe to the event subjects", async () => {
    const sub = conn("agent").subscribe("wk.v1.events.>")
    await conn("agent").flush()
    await refused("agent", "subscription", "wk.v1.events.>")
    await expect(sub.closed).resolves.toBeInstanceOf(errors.PermissionViolationError)
  })

  it("can propose, get, cancel and ack", async () => {
    for (const subject of [Subjects.propose, Subjects.get, Subjects.cancel, Subjects.ack]) await expectPublishAllowed("agent", subject)
  })

  it("reads its session results from WK_SESSIONS with an ephemeral consumer", async () => {
    const session = token()
    const subject = Subjects.sessionResults(session)
    await jetstream(kernel()).publish(subject, encoder.encode(JSON.stringify({ held_id: "h_1", session_id: session, delivery_id: "d1" })))
    const consumer = await sessionReader("agent", subject, false)
    const m = await consumer.next({ expires: 2000 })
    expect(m?.subject).toBe(subject)
    expect(m?.json()).toMatchObject({ session_id: session, delivery_id: "d1" })
    await consumer.delete()
    expect(violations.get("agent")!.filter((v) => v.subject.includes("WK_SESSIONS"))).toEqual([])
  })

  // The client library's reader of session results, as the agent role. Regression guard: it must
  // pass a single filter subject (a `filter_subjects` array needs nats-server >= 2.10, and
  // Debian bookworm's `apt-get install nats-server` is 2.9.10).
  it("WitnessClient.result reads a delivery from WK_SESSIONS as the agent role", async () => {
    const session = token()
    const delivery = { held_id: `h_${session}`, session_id: session, turn_id: "t", call_id: "c", continuation_ref: null, outcome: "denied", admission: null, result: null, call_digest: "0".repeat(64), delivery_id: "d1" }
    await jetstream(kernel()).publish(Subjects.sessionResults(session), encoder.encode(JSON.stringify(delivery)))
    const got = await clientFor(conn("agent"), "agent:alice").result(delivery.held_id, { sessionId: session, ack: false, timeoutMs: 3000 })
    expect(got).toEqual(delivery)
  })

  it("cannot create a durable consumer that would outlive it: not by name, not by the durable API, not by the unnamed create", async () => {
    const jsm = await jetstreamManager(conn("agent"), { timeout: 2000 })
    const name = `evil_${token()}`
    const durable = { durable_name: name, filter_subject: "wk.v1.sessions.>", ack_policy: AckPolicy.None }
    // nats.js sends a named config to CONSUMER.CREATE.<stream>.<name>.<filter>: not granted.
    await expect(jsm.consumers.add(Streams.sessions, { ...durable, name })).rejects.toSatisfy(permissionDenied)
    await refused("agent", "publish", `$JS.API.CONSUMER.CREATE.${Streams.sessions}.${name}.wk.v1.sessions.>`)
    const legacy = `$JS.API.CONSUMER.DURABLE.CREATE.${Streams.sessions}.${name}`
    conn("agent").publish(legacy, encoder.encode(JSON.stringify({ stream_name: Streams.sessions, config: durable })))
    await refused("agent", "publish", legacy)
    // The unnamed create is granted, and there the server itself refuses a durable name.
    const r = await conn("agent").request(`$JS.API.CONSUMER.CREATE.${Streams.sessions}`, encoder.encode(JSON.stringify({ stream_name: Streams.sessions, config: durable })), { timeout: 3000 })
    expect(r.json<{ error?: { err_code: number } }>().error?.err_code).toBe(10020)
    expect(await durablesOnSessions()).toEqual([])
  })

  it("cannot keep other sessions present: no wildcard over presence, no confined agent's session; its own one-token sessions only", async () => {
    for (const subject of ["wk.v1.presence.>", "wk.v1.presence.*.>", Subjects.presence(`alice.${token()}`), "wk.v1.presence.alice.>"]) {
      const sub = conn("agent").subscribe(subject)
      await conn("agent").flush()
      await refused("agent", "subscription", subject)
      await expect(sub.closed).resolves.toBeInstanceOf(errors.PermissionViolationError)
    }
    const own = Subjects.presence(token())
    conn("agent").subscribe(own)
    await conn("agent").flush()
    const probe = await kernel().request(own, encoder.encode(""), { timeout: 300 }).then(() => "answered", (e: unknown) => (e instanceof errors.TimeoutError || (e instanceof Error && /timeout/i.test(e.message)) ? "present" : String(e)))
    expect(probe).toBe("present")
    expect(violations.get("agent")!.filter((v) => v.subject === own)).toEqual([])
  })

  it("subscribes live to its session results", async () => {
    const subject = Subjects.sessionResults(token())
    const got: Array<string> = []
    conn("agent").subscribe(subject, { callback: (_e, m) => { got.push(m.string()) } })
    await conn("agent").flush()
    kernel().publish(subject, encoder.encode("live"))
    await eventually(async () => got.length === 1, 3000, 10)
    expect(got).toEqual(["live"])
  })
})

// Agents with their own NATS user (nats.conf AGENT_ALICE / AGENT_BOB): alice's sessions are
// `alice.<id>`; she reads those and nothing of bob's, by any route the server offers.
describe("isolated agent", () => {
  it("reads its own session results: an ordered consumer under its namespace and a live subscription", async () => {
    const session = `alice.${token()}`
    const subject = Subjects.sessionResults(session)
    const got: Array<string> = []
    conn("alice").subscribe(subject, { callback: (_e, m) => { got.push(m.string()) } })
    await conn("alice").flush()
    await jetstream(kernel()).publish(subject, encoder.encode(JSON.stringify({ held_id: "h_1", session_id: session, delivery_id: "d1" })))
    const consumer = await sessionReader("alice", subject, true)
    const m = await consumer.next({ expires: 2000 })
    expect(m?.json()).toMatchObject({ session_id: session, delivery_id: "d1" })
    await consumer.delete()
    await eventually(async () => got.length === 1, 3000, 10)
    expect(violations.get("alice")!).toEqual([])
  })

  it("cannot read another agent's session: no subscription, no consumer on it or on the whole stream, no read by sequence", async () => {
    const subject = Subjects.sessionResults(`bob.${token()}`)
    await jetstream(kernel()).publish(subject, encoder.encode(JSON.stringify({ secret: "bob's result" })))
    const sub = conn("alice").subscribe(subject)
    await conn("alice").flush()
    await refused("alice", "subscription", subject)
    await expect(sub.closed).resolves.toBeInstanceOf(errors.PermissionViolationError)
    await expect(sessionReader("alice", subject, true)).rejects.toSatisfy(permissionDenied)
    await expect(sessionReader("alice", "wk.v1.sessions.>", true)).rejects.toSatisfy(permissionDenied)
    await expect(sessionReader("alice", subject, false)).rejects.toSatisfy(permissionDenied)
    const jsm = await jetstreamManager(conn("alice"), { timeout: 2000, checkAPI: false })
    await expect(jsm.direct.getMessage(Streams.sessions, { last_by_subj: subject })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.getMessage(Streams.sessions, { last_by_subj: subject })).rejects.toSatisfy(permissionDenied)
    // Control: bob reads it.
    const mine = await sessionReader("bob", subject, true)
    expect((await mine.next({ expires: 2000 }))?.json()).toEqual({ secret: "bob's result" })
    await mine.delete()
  })

  it("cannot list other agents' session ids: no stream info (a subjects filter would name them)", async () => {
    await jetstream(kernel()).publish(Subjects.sessionResults(`bob.${token()}`), encoder.encode("{}"))
    const jsm = await jetstreamManager(conn("alice"), { timeout: 2000 })
    await expect(jsm.streams.info(Streams.sessions, { subjects_filter: "wk.v1.sessions.>" })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.info(Streams.sessions)).rejects.toSatisfy(permissionDenied)
  })

  it("cannot create a durable consumer, even on its own sessions, by the durable API", async () => {
    const name = `evil_${token()}`
    const legacy = `$JS.API.CONSUMER.DURABLE.CREATE.${Streams.sessions}.${name}`
    conn("alice").publish(legacy, encoder.encode(JSON.stringify({ stream_name: Streams.sessions, config: { durable_name: name, filter_subject: "wk.v1.sessions.alice.>" } })))
    await refused("alice", "publish", legacy)
  })

  it("cannot read held calls with held.get (unsigned: it would show any call's result)", async () => {
    await expectPublishRefused("alice", Subjects.get)
  })

  it("cannot keep another agent's session present", async () => {
    const subject = Subjects.presence(`bob.${token()}`)
    conn("alice").subscribe(subject)
    await conn("alice").flush()
    await refused("alice", "subscription", subject)
  })

  it("cannot publish events, attest, invoke tools, apply policy or write KV", async () => {
    for (const subject of [Subjects.events(`h_${token()}`), Subjects.attest, Subjects.toolInvoke(token()), Subjects.policyApply, `$KV.${Buckets.facts}.${token()}`]) {
      await expectPublishRefused("alice", subject)
    }
  })

  it("can propose, cancel and ack", async () => {
    for (const subject of [Subjects.propose, Subjects.cancel, Subjects.ack]) await expectPublishAllowed("alice", subject)
  })
})

describe("gateway", () => {
  it("relays propose, get, attest and cancel", async () => {
    for (const subject of [Subjects.propose, Subjects.get, Subjects.attest, Subjects.cancel]) await expectPublishAllowed("gateway", subject)
  })

  it("cannot publish events or wakes, invoke tools, apply policy or write KV", async () => {
    for (const subject of [Subjects.events(`h_${token()}`), Subjects.wake(`h_${token()}`), Subjects.toolInvoke(token()), Subjects.policyApply, `$KV.${Buckets.open}.${token()}`]) {
      await expectPublishRefused("gateway", subject)
    }
  })

  it("reads a held call's events, and not the open-call index (the kernel lists calls, for a proven reader: wk.v1.held.list)", async () => {
    const earlier = violations.get("gateway")!.length
    const heldId = `h_${token()}`
    await jetstream(kernel()).publish(Subjects.events(heldId), encoder.encode(JSON.stringify({ x: 1 })))
    const consumer = await jetstream(conn("gateway"), { timeout: 3000 }).consumers.get(Streams.events, { filter_subjects: Subjects.events(heldId) })
    expect((await consumer.next({ expires: 2000 }))?.json()).toEqual({ x: 1 })
    await consumer.delete()
    expect(violations.get("gateway")!.slice(earlier)).toEqual([])
    await (await new Kvm(kernel()).open(Buckets.open)).put(token(), encoder.encode("1"))
    await expect(new Kvm(conn("gateway")).open(Buckets.open).then(async (kv) => { for await (const _ of await kv.keys()) void _ })).rejects.toThrow()
  })
})

// Replies travel to `_INBOX_<user>.`; no user but the kernel may listen under another's prefix.
describe("reply inboxes", () => {
  it.each([
    ["alice", "_INBOX_agent-bob.>"],
    ["alice", "_INBOX.>"],
    ["agent", "_INBOX_witness.>"],
    ["witness", "_INBOX_agent.>"],
    ["auditor", "_INBOX_agent.>"],
    ["tool", "_INBOX_agent.>"],
    ["bob", ">"]
  ] as const)("%s cannot subscribe to %s", async (role, subject) => {
    const sub = conn(role).subscribe(subject)
    await conn(role).flush()
    await refused(role, "subscription", subject)
    await expect(sub.closed).resolves.toBeInstanceOf(errors.PermissionViolationError)
  })

  it("a client on the default _INBOX. prefix (written from the protocol alone) still gets its replies as a shared role", async () => {
    const plain = await connect({ servers, ...Roles.agent, name: "test default-inbox agent" })
    const subject = Subjects.get
    const responder = kernel().subscribe(subject, { max: 1, callback: (_e, m) => void m.respond(encoder.encode("answered")) })
    await kernel().flush()
    try {
      expect((await plain.request(subject, encoder.encode("{}"), { timeout: 3000 })).string()).toBe("answered")
    } finally {
      responder.unsubscribe()
      await plain.close()
    }
  })

  it("a reply to an agent reaches only that agent's inbox", async () => {
    const subject = `wk.v1.held.ack`
    const responder = kernel().subscribe(subject, { max: 1, callback: (_e, m) => void m.respond(encoder.encode("private")) })
    await kernel().flush()
    const r = await conn("alice").request(subject, encoder.encode("{}"), { timeout: 3000 })
    expect(r.string()).toBe("private")
    responder.unsubscribe()
  })
})

describe("auditor", () => {
  it("the kernel's connection layer, used with auditor credentials (audit replay), listens only where the auditor may", async () => {
    const seen = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const { nc } = yield* Nats
          const errs: Array<unknown> = []
          void (async () => {
            for await (const s of nc.status()) if (s.type === "error") errs.push(s.error)
          })()
          yield* Effect.promise(() => nc.flush())
          yield* Effect.sleep("300 millis")
          return errs
        }).pipe(Effect.provide(layerNats({ servers, ...Roles.auditor, name: "perm-auditor-layer" })))
      )
    )
    expect(seen).toEqual([])
  })

  it("cannot publish to any wk subject: events, propose, attest", async () => {
    const subject = Subjects.events(`h_${token()}`)
    await expectPublishRefused("auditor", subject)
    expect(await storedOn(Streams.events, subject)).toBe(1) // only the kernel's control message
    await expectPublishRefused("auditor", Subjects.propose)
    await expectPublishRefused("auditor", Subjects.attest)
    await expectPublishRefused("auditor", Subjects.cancel)
    await expectPublishRefused("auditor", Subjects.policyApply)
  })

  it("reads WK_EVENTS with an ordered consumer", async () => {
    const subject = Subjects.events(`h_${token()}`)
    const js = jetstream(kernel())
    for (const i of [1, 2, 3]) await js.publish(subject, encoder.encode(JSON.stringify({ event_id: `e${i}` })), { msgID: `${subject}:${i}` })
    const consumer = await jetstream(conn("auditor"), { timeout: 3000 }).consumers.get(Streams.events, { filter_subjects: subject })
    const read: Array<string> = []
    for (let i = 0; i < 3; i++) {
      const m = await consumer.next({ expires: 2000 })
      read.push((m?.json() as { event_id: string }).event_id)
    }
    expect(read).toEqual(["e1", "e2", "e3"])
    await consumer.delete()
    expect(violations.get("auditor")!.filter((v) => v.subject.includes("WK_EVENTS"))).toEqual([])
  })

  it("is read-only: cannot purge, delete messages or delete the stream", async () => {
    const subject = Subjects.events(`h_${token()}`)
    await jetstream(kernel()).publish(subject, encoder.encode("{}"))
    const jsm = await jetstreamManager(conn("auditor"), { timeout: 2000 })
    const seq = (await jsm.streams.getMessage(Streams.events, { last_by_subj: subject }))!.seq
    await expect(jsm.streams.purge(Streams.events, { filter: subject })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.deleteMessage(Streams.events, seq)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.delete(Streams.events)).rejects.toSatisfy(permissionDenied)
    expect(await storedOn(Streams.events, subject)).toBe(1)
  })

  it("cannot update, delete or drain the kernel's durable controller consumer", async () => {
    const jsmK = await jetstreamManager(kernel())
    const stream = Streams.wakes
    const exists = await jsmK.consumers.info(stream, ControllerConsumer).then(() => true, () => false)
    if (!exists) await jsmK.consumers.add(stream, { durable_name: ControllerConsumer, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All })
    const before = (await jsmK.consumers.info(stream, ControllerConsumer)).config
    const jsm = await jetstreamManager(conn("auditor"), { timeout: 2000 })
    await expect(jsm.consumers.update(stream, ControllerConsumer, { description: "auditor was here", max_deliver: 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.consumers.delete(stream, ControllerConsumer)).rejects.toSatisfy(permissionDenied)
    // pulling from it: refused, nothing is delivered or taken from the kernel
    await jetstream(kernel()).publish(Subjects.wake(`h_${token()}`), encoder.encode("{}"))
    const pending = await jsmK.consumers.info(stream, ControllerConsumer)
    expect(pending.num_pending).toBeGreaterThan(0)
    const pull = jsm.consumers.info(stream, ControllerConsumer).then(() => jetstream(conn("auditor"), { timeout: 2000 }).consumers.get(stream, ControllerConsumer)).then((c) => c.next({ expires: 1000 }))
    await expect(pull).rejects.toSatisfy(permissionDenied)
    const after = await jsmK.consumers.info(stream, ControllerConsumer)
    expect(after.config).toEqual(before)
    expect(after.delivered).toEqual(pending.delivered)
    expect(after.num_ack_pending).toBe(pending.num_ack_pending)
    if (!exists) await jsmK.consumers.delete(stream, ControllerConsumer)
  })

  it("cannot publish wakes (only the kernel wakes its controller)", async () => {
    await expectPublishRefused("auditor", Subjects.wake(`h_${token()}`))
  })

  it("reads the fact projection but cannot write it", async () => {
    const key = token()
    const kernelKv = await new Kvm(kernel()).open(Buckets.facts)
    await kernelKv.put(key, encoder.encode(`{"v":1}`))
    const kv = await new Kvm(conn("auditor")).open(Buckets.facts)
    expect((await kv.get(key))?.json()).toEqual({ v: 1 })
    await expect(kv.put(key, encoder.encode(`{"v":2}`), { timeout: 2000 })).rejects.toSatisfy(permissionDenied)
    expect((await kernelKv.get(key))?.json()).toEqual({ v: 1 })
    await kernelKv.purge(key)
  })
})

describe("witness", () => {
  it("can attest and get", async () => {
    await expectPublishAllowed("witness", Subjects.attest)
    await expectPublishAllowed("witness", Subjects.get)
  })

  it("cannot propose nor publish events or wakes", async () => {
    await expectPublishRefused("witness", Subjects.propose)
    await expectPublishRefused("witness", Subjects.wake(`h_${token()}`))
    const subject = Subjects.events(`h_${token()}`)
    await expectPublishRefused("witness", subject)
    expect(await storedOn(Streams.events, subject)).toBe(1)
  })

  it("asks for standing approvals over the protocol, and cannot forge a grant's record on its subject", async () => {
    for (const subject of [Subjects.standingGrant, Subjects.standingRevoke, Subjects.standingList]) await expectPublishAllowed("witness", subject)
    const record = Subjects.events(`_standing.${token()}`)
    await expectPublishRefused("witness", record)
    await expectPublishRefused("agent", record)
    // Only the kernel's control publish was stored.
    expect(await storedOn(Streams.events, record)).toBe(2)
  })

  it("receives witness requests", async () => {
    const subject = Subjects.witnessRequests(`h_${token()}`)
    const got: Array<string> = []
    conn("witness").subscribe(subject, { callback: (_e, m) => { got.push(m.string()) } })
    await conn("witness").flush()
    kernel().publish(subject, encoder.encode("please"))
    await eventually(async () => got.length === 1, 3000, 10)
  })
})

describe("tool service", () => {
  it("each tool service serves its own tools and answers the kernel's requests", async () => {
    const sub = conn("bank").subscribe(Subjects.toolInvoke("bank_balance"), { callback: (_e, m) => { m.respond(encoder.encode(JSON.stringify({ ok: true, result: { subject: m.subject } }))) } })
    await conn("bank").flush()
    const reply = await kernel().request(Subjects.toolInvoke("bank_balance"), encoder.encode("{}"), { timeout: 3000 })
    expect(reply.json()).toEqual({ ok: true, result: { subject: Subjects.toolInvoke("bank_balance") } })
    sub.unsubscribe()
    expect(violations.get("bank")).toEqual([])
  })

  // Only the tool's own user (and the kernel) may subscribe to its subjects: nobody else can read
  // its requests, and a reply can only come from a user that received the request.
  it.each([
    ["tool", "wk.v1.tools.>"],
    ["tool", "wk.v1.tools.money_transfer.invoke"],
    ["tool", "wk.v1.tools.*.invoke"],
    ["echo", "wk.v1.tools.money_transfer.invoke"],
    ["echo", "wk.v1.tools.>"],
    ["bank", "wk.v1.tools.fs_read.invoke"],
    ["bank", "wk.v1.tools.>"],
    ["agent", "wk.v1.tools.money_transfer.invoke"],
    ["witness", "wk.v1.tools.money_transfer.invoke"],
    ["gateway", "wk.v1.tools.money_transfer.invoke"],
    ["auditor", "wk.v1.tools.money_transfer.invoke"],
    ["tool", "wk.v1.kernel.tools.>"],
    ["bank", "wk.v1.kernel.tools.kernel_policy_apply.invoke"],
    ["bank", "wk.v1.tools.kernel_policy_apply.invoke"],
    ["agent", "wk.v1.kernel.tools.>"]
  ] as const)("%s cannot subscribe to %s", async (role, subject) => {
    const sub = conn(role).subscribe(subject)
    await conn(role).flush()
    await refused(role, "subscription", subject)
    await expect(sub.closed).resolves.toBeInstanceOf(errors.PermissionViolationError)
  })

  it("a tool service cannot publish a reply it was not asked for (the kernel's reply inbox)", async () => {
    for (const role of ["tool", "bank", "echo"] as const) await expectPublishRefused(role, `_INBOX_kernel.${token()}.1`)
  })

  it("cannot publish events", async () => {
    const subject = Subjects.events(`h_${token()}`)
    await expectPublishRefused("bank", subject)
    expect(await storedOn(Streams.events, subject)).toBe(1)
  })

  it("cannot subscribe to event subjects", async () => {
    conn("bank").subscribe("wk.v1.events.>")
    await conn("bank").flush()
    await refused("bank", "subscription", "wk.v1.events.>")
  })

  it("nats.conf's demo bank user is what `wk nats tool-user` generates", () => {
    const shipped = readFileSync(defaultConfig, "utf8")
    expect(shipped).toContain(toolUserEntry("demo-bank", ["money_transfer", "bank_balance"], Roles.bank.pass))
  })
})

describe("kernel", () => {
  it("can do everything: events, attest, tools, KV, session results", async () => {
    const subject = Subjects.events(`h_${token()}`)
    await expectPublishAllowed("kernel", subject)
    const ack = await jetstream(kernel()).publish(subject, encoder.encode("{}"))
    expect(ack.stream).toBe(Streams.events)
    await expectPublishAllowed("kernel", Subjects.attest)
    await expectPublishAllowed("kernel", Subjects.propose)
    await expectPublishAllowed("kernel", Subjects.toolInvoke(token()))
    await expectPublishAllowed("kernel", Subjects.policyApply)
    const sess = await jetstream(kernel()).publish(Subjects.sessionResults(token()), encoder.encode("{}"))
    expect(sess.stream).toBe(Streams.sessions)
    const kv = await new Kvm(kernel()).open(Buckets.leases)
    const key = token()
    expect(await kv.create(key, encoder.encode("{}"))).toBeGreaterThan(0)
    await kv.purge(key)
    expect(violations.get("kernel")).toEqual([])
  })
})

describe("the wake queue", () => {
  // A kernel deletes the recovery wake of a call it settled (Wakes.retire). Any other login able
  // to delete a wake could take a crashed kernel's call out of recovery: none can (the operator's
  // provisioner login, which sets the streams up, is left out).
  it("no role but the kernel deletes a pending wake: each attempt is refused and the wake stays; the kernel's delete takes it", async () => {
    const subject = Subjects.wake(`h_${token()}`)
    const { seq } = await jetstream(kernel()).publish(subject, encoder.encode("{}"))
    const deleteSubject = `$JS.API.STREAM.MSG.DELETE.${Streams.wakes}`
    for (const role of Object.keys(Roles).filter((r) => r !== "kernel" && r !== "provisioner") as Array<Role>) {
      await conn(role).request(deleteSubject, encoder.encode(JSON.stringify({ seq, no_erase: true })), { timeout: 1000 }).catch(() => undefined)
      await refused(role, "publish", deleteSubject)
      expect(await storedOn(Streams.wakes, subject)).toBe(1)
    }
    expect(await (await jetstreamManager(kernel())).streams.deleteMessage(Streams.wakes, seq, false)).toBe(true)
    expect(await storedOn(Streams.wakes, subject)).toBe(0)
  })
})

