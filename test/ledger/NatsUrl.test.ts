import { describe, expect, it } from "vitest"
import { natsOptionsFromUrl } from "../../runtime/ledger/Nats.js"

describe("natsOptionsFromUrl", () => {
  it("parses one URL with credentials into host:port and user/pass", () => {
    expect(natsOptionsFromUrl("nats://kernel:kernel-dev@127.0.0.1:4322")).toEqual({ servers: "127.0.0.1:4322", user: "kernel", pass: "kernel-dev" })
  })

  it("accepts host:port without a scheme, defaults the port, and uses the fallback credentials", () => {
    expect(natsOptionsFromUrl("127.0.0.1:4301", { user: "agent", pass: "agent-dev" })).toEqual({ servers: "127.0.0.1:4301", user: "agent", pass: "agent-dev" })
    expect(natsOptionsFromUrl("nats://localhost")).toEqual({ servers: "localhost:4222" })
  })

  it("decodes percent-encoded credentials", () => {
    expect(natsOptionsFromUrl("nats://k%40x:p%3Aw@127.0.0.1:1")).toMatchObject({ user: "k@x", pass: "p:w" })
  })

  it("parses a comma-separated list into a server list; credentials from the first entry that has them", () => {
    expect(natsOptionsFromUrl("nats://kernel:kernel-dev@127.0.0.1:4301,127.0.0.1:4302,nats://127.0.0.1:4303")).toEqual({
      servers: ["127.0.0.1:4301", "127.0.0.1:4302", "127.0.0.1:4303"],
      user: "kernel",
      pass: "kernel-dev"
    })
    expect(natsOptionsFromUrl(" 127.0.0.1:4301 , nats://tool:tool-dev@127.0.0.1:4302, nats://agent:agent-dev@127.0.0.1:4303,", { user: "x", pass: "y" })).toEqual({
      servers: ["127.0.0.1:4301", "127.0.0.1:4302", "127.0.0.1:4303"],
      user: "tool",
      pass: "tool-dev"
    })
    expect(natsOptionsFromUrl("127.0.0.1:4301,127.0.0.1:4302", { user: "auditor", pass: "auditor-dev" })).toEqual({ servers: ["127.0.0.1:4301", "127.0.0.1:4302"], user: "auditor", pass: "auditor-dev" })
  })

  it("a user without a password keeps the fallback password", () => {
    expect(natsOptionsFromUrl("nats://kernel@127.0.0.1:4301", { user: "x", pass: "fallback" })).toEqual({ servers: "127.0.0.1:4301", user: "kernel", pass: "fallback" })
  })

  it("a bad entry is a clear error naming it", () => {
    expect(() => natsOptionsFromUrl("nats://127.0.0.1:4301,nats://bad host:99")).toThrow(/NATS URL entry "nats:\/\/bad host:99" is not a URL/)
    expect(() => natsOptionsFromUrl("127.0.0.1:notaport")).toThrow(/"127.0.0.1:notaport" is not a URL/)
    expect(() => natsOptionsFromUrl(" , ")).toThrow(/NATS URL is empty/)
  })
})
