import { isReservedTool } from "../schema/Profile.js"
import { isGranted, type ActivePolicy } from "./ActivePolicy.js"

/**
 * The kernel floor for one call, before any policy runs and again for every call a transform
 * produces: a reserved kernel tool (`kernel_*`) is never reached through policy (only the
 * kernel's own path proposes it), and a principal calls only the tools it is granted.
 * Returns why the call is refused, or undefined when the floor admits it.
 */
export const floorRefusal = (policy: ActivePolicy, principal: string, tool: string): string | undefined =>
  isReservedTool(tool)
    ? `'${tool}' is a reserved kernel tool; only the kernel proposes it`
    : isGranted(policy, principal, tool)
      ? undefined
      : `principal '${principal}' has no capability for tool '${tool}'`
