// Preloaded into a kernel process (`node --import`): the process SIGKILLs itself the moment it
// first publishes on a witness request subject, that is right after a hold's commit and before the
// request leaves. Nothing is sent; the commit is all the durable record holds of the request.
import { NatsConnectionImpl } from "@nats-io/nats-core/internal"

const publish = NatsConnectionImpl.prototype.publish
NatsConnectionImpl.prototype.publish = function (subject, ...rest) {
  if (typeof subject === "string" && subject.startsWith("wk.v1.witness.requests.")) process.kill(process.pid, "SIGKILL")
  return publish.call(this, subject, ...rest)
}
