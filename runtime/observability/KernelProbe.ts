import { Context } from "effect"

/**
 * What the operator endpoints (KernelHttp.ts) read of the kernel: the connection's state, the
 * readiness checks and the gauges a scrape sets. The port sits here, below ledger/, since ledger/
 * logs and counts through observability/; ledger/NatsKernelProbe.ts implements it over the
 * connection and the policy store. Every read is a promise; none writes.
 */
export class KernelProbe extends Context.Tag("wk/KernelProbe")<
  KernelProbe,
  {
    /** Whether the connection is up now (disconnects and closes as the client reports them). */
    readonly connected: () => boolean
    /** A round trip to the server: a server that hangs keeps the socket open and answers nothing. */
    readonly roundTrip: () => Promise<void>
    /** Rejects unless the kernel's streams are there. */
    readonly streamsPresent: () => Promise<void>
    /** Rejects unless the controller's consumer is bound; resolves to its pending count. */
    readonly consumerPending: () => Promise<number>
    /** The policy epoch this process holds (0: none loaded). */
    readonly policyEpoch: () => Promise<number>
    /** Open held calls by state (`open/<readiness>[/<execution>]`). */
    readonly openCallsByState: () => Promise<ReadonlyMap<string, number>>
  }
>() {}
