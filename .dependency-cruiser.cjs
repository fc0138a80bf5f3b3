/**
 * The kernel's dependency rules, checked in CI by `npm run deps`.
 *
 * The house has floors (`floors` below, lowest first). A room is a folder of runtime/ or a file at
 * its root; a room imports only rooms on lower floors (never one above it, never a neighbour on its
 * own floor), so no two folders reach each other. The auditor and the client read: they never
 * reach the write path, however indirectly. Violations are not suppressed: the known-violations
 * file `.dependency-cruiser-known.json` is empty and stays so.
 */
const floors = [
  { floor: "schema", rooms: ["schema"], what: "messages, their schemas and pure helpers (canonical JSON, signatures, subjects)" },
  { floor: "core", rooms: ["heldcall"], what: "the pure core: every decision over facts, time and ids passed in" },
  { floor: "observability", rooms: ["observability"], what: "logs, traces, metrics, and the port the operator endpoints read" },
  { floor: "policy and the client", rooms: ["policy", "client"], what: "rules, the adjudication seams and the policy store's port; the agents' SDK" },
  { floor: "plugins", rooms: ["plugins"], what: "WASM stages that fill the policy's seams" },
  { floor: "ledger", rooms: ["ledger"], what: "the only code that holds the kernel's NATS connection: every port behind it" },
  { floor: "configuration", rooms: ["KernelConfig.ts"], what: "the kernel's settings" },
  { floor: "tool services", rooms: ["executor"], what: "tool identities and the demo tool service" },
  { floor: "drive", rooms: ["loops"], what: "the controller and the actions it performs" },
  { floor: "protocol and the auditor", rooms: ["protocol", "audit"], what: "request handlers over the ledger's ports; the read-only auditor" },
  { floor: "services", rooms: ["gateway", "integrations", "routes", "verifiers"], what: "processes beside the kernel that speak its protocol" },
  { floor: "kernel", rooms: ["Kernel.ts"], what: "the composition of every layer" },
  { floor: "cli", rooms: ["cli"], what: "wk" }
]

/** The write path: the drive, the protocol handlers, and every ledger module that writes. */
const writePath = [
  "^runtime/(protocol|loops|executor)/",
  "^runtime/ledger/(HeldCallStore|EventLog|Projection|Wakes|Outbox|Leases|OpenIndex|PresenceMarks|StandingGrants|Provision|NatsPolicyStore|Checkpoints|KeyRotations|Archive|Retention|ReadNonces|ReevaluationProgressStore|ContinuationStore|LedgerPorts|ToolClient|PluginStore|WrittenCommits)\\.ts$",
  "^runtime/ledger/memory/"
].join("|")

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
/** A room's path pattern: a folder of runtime/, or one file at its root. */
const roomPath = (room) => (room.endsWith(".ts") ? `^runtime/${escape(room)}$` : `^runtime/${escape(room)}/`)

/** One rule per room: nothing on its own floor but itself, nothing above (the top floor has no rule). */
const floorRules = floors.flatMap(({ floor, rooms }, i) =>
  rooms.flatMap((room) => {
    const above = floors.slice(i).flatMap((f) => f.rooms).filter((r) => r !== room)
    if (above.length === 0) return []
    return {
      name: `floor-${room.replace(/\.ts$/, "")}`,
      severity: "error",
      comment: `${room} stands on floor ${i + 1} (${floor}): it imports only lower floors, never ${above.join(", ")}.`,
      from: { path: roomPath(room) },
      to: { path: above.map(roomPath).join("|") }
    }
  })
)

module.exports = {
  forbidden: [
    ...floorRules,
    {
      name: "no-cycles",
      severity: "error",
      comment: "An import cycle makes modules impossible to read, test or load on their own.",
      from: { path: "^runtime/" },
      to: { circular: true }
    },
    {
      name: "schema-is-the-floor",
      severity: "error",
      comment: "schema/ describes messages; it imports nothing else of the kernel.",
      from: { path: "^runtime/schema/" },
      to: { path: "^runtime/", pathNot: "^runtime/schema/" }
    },
    {
      name: "heldcall-is-pure",
      severity: "error",
      comment: "heldcall/ is the pure core: it imports only schema/ and itself, and no I/O module.",
      from: { path: "^runtime/heldcall/" },
      to: { pathNot: "^runtime/(heldcall|schema)/|^node_modules/(effect|canonicalize|tweetnacl)/" }
    },
    {
      name: "readers-never-reach-the-write-path",
      severity: "error",
      comment: "The auditor and the client never reach the write path, however indirectly: protocol/, loops/, executor/ or a ledger module that writes.",
      from: { path: "^runtime/(audit|client)/" },
      to: { path: writePath, reachable: true }
    },
    {
      name: "loops-reach-nats-through-ledger",
      severity: "error",
      comment: "The drive reaches NATS only through ledger/'s ports.",
      from: { path: "^runtime/loops/" },
      to: { path: "^node_modules/@nats-io/" }
    },
    {
      name: "the-auditor-holds-the-read-port",
      severity: "error",
      comment: "The auditor reads through ledger/LedgerReader.ts (no publish, put or purge); it never holds the connection's tag.",
      from: { path: "^runtime/audit/" },
      to: { path: "^runtime/ledger/Nats\\.ts$" }
    },
    {
      name: "the-connection-stays-behind-ledger",
      severity: "error",
      comment: "The kernel's connection (ledger/Nats.ts) and nats.js stay behind ledger/'s ports for the core, observability/, policy/, plugins/ and the auditor (loops/ may not import nats.js either).",
      from: { path: "^runtime/(schema|heldcall|observability|policy|plugins|audit)/" },
      to: { path: "^runtime/ledger/Nats\\.ts$|^node_modules/@nats-io/" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    // Worktrees link node_modules from elsewhere: keep the link's path so the NATS rule still matches.
    preserveSymlinks: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"], extensions: [".ts", ".js", ".mjs", ".cjs"] },
    exclude: { path: "^build/" }
  }
}

/** The floors, for the folder-cycle test and the docs (not enumerable: depcruise's schema admits only its own keys). */
Object.defineProperty(module.exports, "floors", { value: floors, enumerable: false })
