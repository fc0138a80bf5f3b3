import { expect, it } from "vitest"
import { post, readAuth, startGatewayHarness, transfer } from "./GatewayHarness.js"

// An inbox tab following a call (SSE) must not keep the gateway from stopping (Ctrl-C, redeploy).
it("the gateway stops promptly with a server-sent event client still connected", async () => {
  const h = await startGatewayHarness()
  const held = (await post(`${h.url}/tool-calls`, transfer(3000))).body
  const path = `/held/${held.held_id}/events`
  const r = await fetch(h.url + path, { headers: { authorization: readAuth("user:carol", "GET", path) } })
  expect(r.status).toBe(200)
  await r.body!.getReader().read()
  const t0 = Date.now()
  await h.stop()
  expect(Date.now() - t0).toBeLessThan(5_000)
}, 60_000)
