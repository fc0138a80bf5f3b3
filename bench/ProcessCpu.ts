import { readFileSync } from "node:fs"

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); 0 where there is none. */
export const cpuSeconds = (pid: number): number => {
  try {
    // Fields after the command name: utime and stime are the 12th and 13th, in clock ticks (100/s).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0
  }
}
