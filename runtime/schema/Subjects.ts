/**
 * Tools named `kernel_*` are the kernel's own (`kernel_policy_apply`): they travel on
 * `wk.v1.kernel.tools.>`, which only kernel users may use, never on the tool services' subjects.
 */
const toolSubjectPrefix = (tool: string): string => (tool.startsWith("kernel_") ? `wk.v1.kernel.tools.${tool}` : `wk.v1.tools.${tool}`)

/** Every NATS subject and JetStream name of protocol v1, in one place. */
export const Subjects = {
  propose: "wk.v1.calls.propose",
  get: "wk.v1.held.get",
  /** The open held calls a signed reader proposed or may witness, each in its view (the gateway's `GET /held`). */
  heldList: "wk.v1.held.list",
  attest: "wk.v1.held.attest",
  edit: "wk.v1.held.edit",
  extend: "wk.v1.held.extend",
  attestBatch: "wk.v1.held.attest_batch",
  settle: "wk.v1.held.settle",
  cancel: "wk.v1.held.cancel",
  ack: "wk.v1.held.ack",
  policyApply: "wk.v1.admin.policy.apply",
  /** Every kernel process answers (no queue group) with its own figures, for operators (`wk status`). */
  adminStatus: "wk.v1.admin.status",
  /** Every kernel process answers (no queue group) with its health, to a signed reader. */
  health: "wk.v1.health",
  /** The tools the signed reader is granted under the policy in force (what an agent may offer its model). */
  grants: "wk.v1.grants.get",
  /** Standing approvals: a witness grants or revokes one (signed); a signed reader lists those it gave or is covered by. */
  standingGrant: "wk.v1.standing.grant",
  standingRevoke: "wk.v1.standing.revoke",
  standingList: "wk.v1.standing.list",
  events: (heldId: string) => `wk.v1.events.${heldId}`,
  policyEvents: "wk.v1.events._policy",
  sessionResults: (sessionId: string) => `wk.v1.sessions.${sessionId}.results`,
  /** A witness withdrew its approval after the session's call was released (kept in `WK_SESSIONS`). */
  sessionRevocations: (sessionId: string) => `wk.v1.sessions.${sessionId}.revocations`,
  /** The same, for witness routes (kept in `WK_WITNESS`; route consumers of requests do not read it). */
  witnessRevocations: (heldId: string) => `wk.v1.witness.revocations.${heldId}`,
  toolInvoke: (tool: string) => `${toolSubjectPrefix(tool)}.invoke`,
  toolReadback: (tool: string) => `${toolSubjectPrefix(tool)}.readback`,
  witnessRequests: (heldId: string) => `wk.v1.witness.requests.${heldId}`,
  /** A witness route's record of one delivery attempt of a held call's request. */
  routeDelivery: (route: string, heldId: string) => `wk.v1.witness.deliveries.${route}.${heldId}`,
  wake: (heldId: string) => `wk.v1.wakes.${heldId}`,
  /**
   * A live agent keeps a subscription here; no subscriber means the session is gone
   * (cancel_on_disconnect). The trailing `live` token lets nats.conf grant one-token sessions
   * (`wk.v1.presence.*.live`) without granting `wk.v1.presence.>`.
   */
  presence: (sessionId: string) => `wk.v1.presence.${sessionId}.live`
} as const

export const Streams = {
  events: "WK_EVENTS",
  sessions: "WK_SESSIONS",
  wakes: "WK_WAKES",
  witness: "WK_WITNESS"
} as const

/** Durable consumers the kernel creates. */
export const Consumers = {
  /** The controller's consumer of WK_WAKES. */
  controller: "wk-controller"
} as const

/** The object store bucket holding plugins. */
export const PluginBucket = "wk_plugins"

export const Buckets = {
  facts: "wk_facts",
  leases: "wk_leases",
  policy: "wk_policy",
  open: "wk_open",
  /** Data plugins may read through granted host functions (`kv` prefixes, `counter.<name>.<principal>`). */
  hostData: "wk_hostdata",
  /** Held calls to cancel when their session disconnects: held_id -> session_id. */
  presence: "wk_presence"
} as const

/**
 * The reply inbox prefix of a NATS user: nats.conf lets each user subscribe only under its own
 * (`_INBOX_<user>.>`), so nobody reads replies meant for another user. Clients connect with it.
 */
export const inboxOptionOf = (user: string | undefined): { readonly inboxPrefix?: string } => (user === undefined ? {} : { inboxPrefix: `_INBOX_${user}` })

/** Largest request body the kernel accepts (protocol: oversized -> 400). */
export const MaxRequestBytes = 1024 * 1024
