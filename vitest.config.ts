import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2,
    minWorkers: 1,
    // Kernels the tests start (in process or as `wk start`) serve no metrics port unless a test
    // asks for one: many run at once and would contend for the default.
    env: { WK_METRICS_PORT: "0" }
  }
})
