import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { errors, type NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { DefaultRetention } from "../../runtime/ledger/Retention.js"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { connectAs } from "../support/Principals.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"

// The history cannot be deleted with the kernel's own NATS credentials: not the events stream,
// not one event, not a purge of any part of it. Only the retention login purges, and it can do
// nothing else to the history (archive.written records it writes are checked by the audit).
const permissionDenied = (e: unknown): boolean => {
  for (let c: unknown = e; c instanceof Error; c = c.cause) if (c instanceof errors.PermissionViolationError) return true
  return false
}

let nats: TestNats
let kernel: NatsConnection
let provisioner: NatsConnection
let retention: NatsConnection
beforeAll(async () => {
  nats = await startTestNats()
  await Effect.runPromise(provision().pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel }))))
  kernel = await connectAs(nats.servers, "kernel")
  provisioner = await connectAs(nats.servers, "provisioner")
  retention = await connectAs(nats.servers, "retention")
})
afterAll(async () => {
  await kernel?.close()
  await provisioner?.close()
  await retention?.close()
  await nats?.dispose()
})

describe("WK_EVENTS under the kernel's credentials", () => {
  it("cannot delete the stream, nor the other evidence streams", async () => {
    const jsm = await jetstreamManager(kernel, { timeout: 3000 })
    await expect(jsm.streams.delete(Streams.events)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.delete(Streams.sessions)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.delete("KV_wk_policy")).rejects.toSatisfy(permissionDenied)
    expect((await jsm.streams.info(Streams.events)).config.name).toBe(Streams.events)
  })

  it("cannot delete one event; deny_delete is set and no update takes it back", async () => {
    const jsm = await jetstreamManager(kernel, { timeout: 3000 })
    const subject = Subjects.events("h_streamguard")
    const ack = await jetstream(kernel).publish(subject, new TextEncoder().encode("{}"))
    await expect(jsm.streams.deleteMessage(Streams.events, ack.seq)).rejects.toSatisfy(permissionDenied)
    const info = await jsm.streams.info(Streams.events)
    expect(info.config.deny_delete).toBe(true)
    const admin = await jetstreamManager(provisioner, { timeout: 3000 })
    await expect(admin.streams.update(Streams.events, { ...info.config, deny_delete: false })).rejects.toThrow(/deny message deletes/)
    expect((await jsm.streams.getMessage(Streams.events, { seq: ack.seq }))?.subject).toBe(subject)
  })

  it("cannot purge WK_EVENTS: not whole, not a call's subject, not the checkpoints, not up to a sequence; nor the archives", async () => {
    const jsm = await jetstreamManager(kernel, { timeout: 3000 })
    const js = jetstream(kernel)
    const call = Subjects.events("h_nopurge")
    const checkpoint = Subjects.events("_checkpoint")
    await js.publish(call, new TextEncoder().encode("{}"))
    const last = await js.publish(checkpoint, new TextEncoder().encode("{}"))
    const before = (await jsm.streams.info(Streams.events)).state.messages
    await expect(jsm.streams.purge(Streams.events)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.events, { filter: call })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.events, { filter: checkpoint })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.events, { seq: last.seq + 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.events, { keep: 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge("OBJ_wk_archive")).rejects.toSatisfy(permissionDenied)
    const after = await jsm.streams.info(Streams.events)
    expect(after.state.messages).toBe(before)
    expect(after.config.deny_purge).toBeFalsy()
  })

  it("the retention login purges by subject, and can neither write a call's history, delete a message, nor touch another stream", async () => {
    const subject = Subjects.events("h_retained")
    const ack = await jetstream(kernel).publish(subject, new TextEncoder().encode("{}"))
    const jsm = await jetstreamManager(retention, { timeout: 3000 })
    const js = jetstream(retention, { timeout: 3000 })
    await expect(js.publish(Subjects.events("h_forged"), new TextEncoder().encode("{}"))).rejects.toThrow()
    await expect(js.publish(Subjects.events("_checkpoint"), new TextEncoder().encode("{}"))).rejects.toThrow()
    await expect(jsm.streams.deleteMessage(Streams.events, ack.seq)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.delete(Streams.events)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.update(Streams.events, { ...(await jsm.streams.info(Streams.events)).config, max_msgs: 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.sessions)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge("OBJ_wk_archive")).rejects.toSatisfy(permissionDenied)
    expect((await jsm.streams.getMessage(Streams.events, { seq: ack.seq }))?.subject).toBe(subject)
    const purged = await jsm.streams.purge(Streams.events, { filter: subject })
    expect(purged.purged).toBe(1)
  })
})

describe("the evidence streams' configuration under the kernel's credentials", () => {
  it("cannot shrink a stream's limits (which would discard history), purge the deliveries, or turn deny_delete off; the provisioner can change limits", async () => {
    const jsm = await jetstreamManager(kernel, { timeout: 3000 })
    const before = await jsm.streams.info(Streams.events)
    await expect(jsm.streams.update(Streams.events, { ...before.config, max_msgs: 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.update(Streams.sessions, { ...(await jsm.streams.info(Streams.sessions)).config, max_age: 1_000_000_000 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.update(Streams.wakes, { ...(await jsm.streams.info(Streams.wakes)).config, max_msgs: 1 })).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.purge(Streams.sessions)).rejects.toSatisfy(permissionDenied)
    await expect(jsm.streams.update("KV_wk_policy", { ...(await jsm.streams.info("KV_wk_policy")).config, max_msgs: 1 })).rejects.toSatisfy(permissionDenied)
    const after = await jsm.streams.info(Streams.events)
    expect(after.config.max_msgs).toBe(before.config.max_msgs)
    expect(after.state.messages).toBe(before.state.messages)
  })

  it("provisioning as the kernel keeps the limits it may not change and says so; `provision` as the provisioner applies them", async () => {
    const retention = { ...DefaultRetention, eventsMaxBytes: 512 * 1024 * 1024 }
    const asKernel = await Effect.runPromise(provision(1, retention).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel }))))
    expect(asKernel.unchanged).toEqual([expect.stringMatching(/^WK_EVENTS \(max_bytes \d+ -> 536870912/)])
    const jsm = await jetstreamManager(kernel, { timeout: 3000 })
    expect((await jsm.streams.info(Streams.events)).config.max_bytes).not.toBe(512 * 1024 * 1024)
    const asProvisioner = await Effect.runPromise(provision(1, retention).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.provisioner }))))
    expect(asProvisioner.unchanged).toEqual([])
    expect((await jsm.streams.info(Streams.events)).config.max_bytes).toBe(512 * 1024 * 1024)
  })
})
