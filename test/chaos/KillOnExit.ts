/**
 * SIGKILLs the processes `pids()` names when this process exits, so an interrupted soak (Ctrl-C)
 * leaves no kernel or nats-server running. Returns the function that unregisters it.
 */
export const killOnExit = (pids: () => ReadonlyArray<number>): (() => void) => {
  const kill = () => {
    for (const pid of pids()) {
      try {
        if (pid > 0) process.kill(pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }
  process.once("exit", kill)
  return () => void process.removeListener("exit", kill)
}
