/**
 * The kernel's dependency rules, checked in CI by `npm run deps`.
 *
 * Layers, lowest first: schema, heldcall (the pure core), ledger (the only code that holds the NATS
 * connection), policy and plugins, loops and executor, protocol, gateway and cli. The auditor and
 * the client read; they never load the write path. Violations that exist today are listed in
 * `.dependency-cruiser-known.json` and shrink as the write path is redesigned; a new one fails CI.
 */
module.exports = {
  forbidden: [
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
      name: "readers-never-load-the-write-path",
      severity: "error",
      comment: "The auditor and the client never import protocol/, loops/ or executor/.",
      from: { path: "^runtime/(audit|client)/" },
      to: { path: "^runtime/(protocol|loops|executor)/" }
    },
    {
      name: "nats-only-through-ledger",
      severity: "error",
      comment: "loops/, policy/, plugins/ and audit/ reach NATS only through ledger/'s ports.",
      from: { path: "^runtime/(loops|policy|plugins|audit)/" },
      to: { path: "^node_modules/@nats-io/" }
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
