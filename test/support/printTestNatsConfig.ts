import { testNatsConfig } from "./TestNats.js"

/** Prints the path of the tests' nats-server config (nats.conf plus the test tool service). */
process.stdout.write(`${testNatsConfig()}\n`)
