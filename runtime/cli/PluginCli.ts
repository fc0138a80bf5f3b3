#!/usr/bin/env node
// Standalone entry for the plugin tooling (the same commands `wk` mounts):
//   npx tsx runtime/cli/PluginCli.ts plugin build plugins/spend-limit
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { keygenCommand, pluginCommand } from "./PluginCommands.js"

const root = Command.make("wk").pipe(Command.withSubcommands([pluginCommand, keygenCommand]))

Command.run(root, { name: "wk", version: "0.1.0" })(process.argv).pipe(
  Effect.catchAll((e) =>
    Effect.sync(() => {
      console.error(`wk: ${e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e)}`)
      process.exitCode = 1
    })
  ),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
