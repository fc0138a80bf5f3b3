import type { HeldCallFacts } from "../schema/Facts.js"
import { decideAck, type Ack } from "./decide/Ack.js"
import { decideAttest, type Attest } from "./decide/Attest.js"
import { decideCancel, decideDisconnect, type Cancel, type Disconnect } from "./decide/Cancel.js"
import type { DecideContext, Decision } from "./decide/Decision.js"
import { decideAttach, decideReport, type Attach, type Report } from "./decide/Dependency.js"
import { decideChangeEpoch, type ChangeEpoch } from "./decide/Epoch.js"
import { decideEdit, type Edit } from "./decide/Edit.js"
import { decideExtend, type Extend } from "./decide/Extend.js"
import { decidePropose, decideProposeRefused, type Propose, type ProposeRefused } from "./decide/Propose.js"
import { decideSettle, type Settle } from "./decide/Settle.js"

export type { DecideContext, Decision } from "./decide/Decision.js"
export type { Ack, Attach, Attest, Cancel, ChangeEpoch, Disconnect, Edit, Extend, Propose, ProposeRefused, Report, Settle }

/**
 * Everything that asks to change one held call from outside its own drive: the protocol's signed
 * requests (propose and edit, attest, a witness's edit or extension, settle, cancel, ack, attaching a nested call), and the
 * kernel's own (a nested call's end on its parent, a session gone, a policy change).
 */
export type Command = Propose | ProposeRefused | Attach | Attest | Edit | Extend | Settle | Cancel | Disconnect | Ack | Report | ChangeEpoch

/**
 * `decide(command, facts, ctx) -> { reply, events }`: the decider beside `evolve` (Reducer) and
 * `reconcile` (Reconciler). Pure: time and the policy's registry arrive in `ctx`, ids are built
 * from causes (EventIds), so the same command on the same facts and context decides the same.
 * A command about a call that does not exist answers 404 (a proposal creates it).
 */
export const decide = (command: Command, facts: HeldCallFacts, ctx: DecideContext): Decision => {
  switch (command._tag) {
    case "Propose":
      return decidePropose(facts, command, ctx)
    case "ProposeRefused":
      return decideProposeRefused(facts, command, ctx)
    case "Attach":
      return decideAttach(facts, command, ctx)
    case "Attest":
      return decideAttest(facts, command, ctx)
    case "Edit":
      return decideEdit(facts, command, ctx)
    case "Extend":
      return decideExtend(facts, command, ctx)
    case "Settle":
      return decideSettle(facts, command, ctx)
    case "Cancel":
      return decideCancel(facts, command, ctx)
    case "Disconnect":
      return decideDisconnect(facts, command, ctx)
    case "Ack":
      return decideAck(facts, command, ctx)
    case "Report":
      return decideReport(facts, command, ctx)
    case "ChangeEpoch":
      return decideChangeEpoch(facts, command, ctx)
  }
}
