#!/usr/bin/env node
import { Command } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { kernelCommand, startCommand } from "./KernelCommands.js"
import { proposeCommand } from "./ProposeCommand.js"
import { keygenCommand, pluginCommand } from "./PluginCommands.js"
import { auditCommand } from "./AuditCommands.js"
import { gatewayCommand } from "./GatewayCommand.js"
import { heldCommand } from "./HeldCommands.js"
import { attestCommand, cancelCommand } from "./WitnessCommands.js"
import { statusCommand } from "./StatusCommand.js"
import { profileCommand } from "./ProfileCommands.js"
import { natsCommand } from "./NatsUsers.js"

const wk = Command.make("wk").pipe(
  Command.withDescription("Witness Kernel: governed tool calls for AI agents"),
  Command.withSubcommands([startCommand, kernelCommand, proposeCommand, auditCommand, keygenCommand, pluginCommand, gatewayCommand, heldCommand, attestCommand, cancelCommand, statusCommand, profileCommand, natsCommand])
)

const cli = Command.run(wk, { name: "wk", version: "0.1.0" })

cli(process.argv).pipe(
  Effect.catchAll((e) => Effect.sync(() => {
    const message = e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)
    console.error(`wk: ${message}`)
    process.exitCode = 1
  })),
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({ disableErrorReporting: true })
)
