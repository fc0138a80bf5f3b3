// The floor's kernel: a process that does, for each request, exactly the round trips a kernel
// does for a call (one tool round trip, the appends as bare JetStream publishes awaited one by
// one, and for a release the session publish) and none of its work. It runs as its own process,
// like `wk kernel`, so the floor has the same process hops as the path it is compared with:
// agent -> NATS -> kernel -> NATS -> tool and back.
import { jetstream } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { inboxOptionOf, Subjects } from "../runtime/schema/Subjects.js"

export const BareAllowSubject = "bench.bare.allow"
export const BareReleaseSubject = "bench.bare.release"
/** Under wk.v1.tools so the bench's tool connection (tool role) may serve it. */
export const BareToolSubject = Subjects.toolInvoke("bench_echo")

const [servers, allowEvents, releaseEvents] = [process.argv[2]!, Number(process.argv[3]), Number(process.argv[4])]
if (import.meta.url === `file://${process.argv[1]}`) {
  const nc = await connect({ servers: servers.split(","), user: "kernel", pass: "kernel-dev", name: "bench bare kernel", noAsyncTraces: true, ...inboxOptionOf("kernel") })
  const js = jetstream(nc)
  let n = 0
  const serve = (subject: string, events: number, session: boolean) =>
    nc.subscribe(subject, {
      callback: (_e, m) =>
        void (async () => {
          const id = ++n
          const tool = await nc.request(BareToolSubject, m.data, { timeout: 5000 })
          for (let k = 0; k < events; k++) await js.publish(`wk.v1.events.bench_bare_${process.pid}_${id}`, m.data, { msgID: `bare-${process.pid}-${id}-${k}` })
          if (session) await js.publish(Subjects.sessionResults("bench-bare"), m.data)
          m.respond(tool.data)
        })()
    })
  serve(BareAllowSubject, allowEvents, false)
  serve(BareReleaseSubject, releaseEvents, true)
  await nc.flush()
  console.log("bare kernel ready")
}
