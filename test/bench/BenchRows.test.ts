import { describe, expect, it } from "vitest"
import { measureDbos } from "../../bench/dbos-workflow.js"
import { measureLangGraph } from "../../bench/langgraph-workflow.js"
import { FloorToolSubject } from "../../bench/durable-floor.js"
import { judgedAgainstReach, progress, row, skippedRow, verdictOf } from "../../bench/Table.js"

describe("bench rows", () => {
  it("judge a ratio against the bound of its target", () => {
    expect(verdictOf(1.5, "<= 1.5x")).toBe("met")
    expect(verdictOf(1.51, "<= 1.5x")).toBe("not met")
    expect(verdictOf(0.3, ">= 0.3x")).toBe("met")
    expect(verdictOf(0.29, ">= 0.3x")).toBe("not met")
    expect(verdictOf(1, "< 1x")).toBe("not met")
    expect(verdictOf(1.2, "> 1x")).toBe("met")
    expect(verdictOf(1.2, "<= 1.5x and < 5 ms")).toBe("met")
    expect(verdictOf(1.2, "delta 3 MB")).toBeUndefined()
    expect(row("allow", 3, 2, "ms", "<= 1.5x")).toMatchObject({ ratio: 1.5, verdict: "met" })
    expect(row("allow", 3, 2, "ms")).not.toHaveProperty("verdict")
    expect(skippedRow("dbos", "ms", "no server", "< 1x")).toMatchObject({ verdict: "skipped: no server", target: "< 1x" })
  })

  it("a target the work floor itself misses is out of reach; one it meets stays 'not met'", () => {
    // The kernel's throughput is 0.1x the floor's, the work floor's 0.19x: no kernel reaches 0.3x here.
    expect(judgedAgainstReach(row("allow rate", 100, 1000, "calls/s", ">= 0.3x"), 0.19).verdict).toBe("not met; out of reach here (work floor 0.19x)")
    // The work floor reaches 0.4x: the kernel's miss is the kernel's.
    expect(judgedAgainstReach(row("allow rate", 100, 1000, "calls/s", ">= 0.3x"), 0.4).verdict).toBe("not met")
    // A met target stays met, and a row without a target has no verdict.
    expect(judgedAgainstReach(row("allow p50", 3, 2, "ms", "<= 1.5x"), 2.6).verdict).toBe("met")
    expect(judgedAgainstReach(row("allow p50", 3, 2, "ms"), 2.6)).not.toHaveProperty("verdict")
    expect(judgedAgainstReach(row("two kernels", 120, 100, "calls/s", ">= 1.6x"), 1.43, "2 cores at this kernel's CPU per call").verdict).toBe("not met; out of reach here (2 cores at this kernel's CPU per call 1.43x)")
  })

  it("a progress reporter prints the line that says all is done once, however often it is told", () => {
    const lines: Array<string> = []
    const report = progress("parking", (line) => void lines.push(line))
    report(1, 3)
    report(2, 3) // within the second: not printed
    for (let i = 0; i < 5; i++) report(3, 3) // workers still finishing their last calls
    expect(lines.map((l) => l.split(" (")[0])).toEqual(["parking: 1/3", "parking: 3/3"])
  })

  it("the DBOS row is skipped, naming the server, when no PostgreSQL answers", async () => {
    const outcome = await measureDbos({ nc: undefined as never, toolSubject: FloorToolSubject, payload: "x", runs: 1, perRun: 1, total: 1, pgServer: "127.0.0.1:1" })
    expect(outcome).toEqual({ skipped: expect.stringContaining("no PostgreSQL server at 127.0.0.1:1") })
  })

  it("the LangGraph row is skipped, naming what is missing, when the packages or the server are not there", async () => {
    const outcome = await measureLangGraph({ nc: undefined as never, toolSubject: FloorToolSubject, payload: "x", runs: 1, perRun: 1, total: 1, pgServer: "127.0.0.1:1" })
    expect(outcome).toEqual({ skipped: expect.stringMatching(/is not installed|no PostgreSQL server at 127\.0\.0\.1:1/) })
  })
})
