import { execFile } from "node:child_process"
import { promisify } from "node:util"
import type { JsonObject } from "../schema/Json.js"

const run = promisify(execFile)

/** Why a verifier could not read what a term asks (the term stays unmet; nothing is attested). */
export class VerifierError extends Error {
  override readonly name = "VerifierError"
}

const str = (params: JsonObject, field: string): string => {
  const v = params[field]
  if (typeof v !== "string" || v === "") throw new VerifierError(`params.${field}: expected a non-empty string`)
  return v
}

/**
 * `git-ancestry`: is commit `commit` an ancestor of ref `ref` in repository `repo`? `repo` is a
 * name the verifier's config maps to a path it may read (a contract never names a path). Reads
 * both objects' full ids and the answer of `git merge-base --is-ancestor`.
 */
export const gitAncestry = (repos: Readonly<Record<string, string>>, timeoutMs: number) => async (params: JsonObject): Promise<JsonObject> => {
  const name = str(params, "repo")
  const path = repos[name]
  if (path === undefined) throw new VerifierError(`params.repo: no repository '${name}' in this verifier's config`)
  const commit = str(params, "commit")
  const ref = str(params, "ref")
  // Arguments that look like options are refused: they name objects, never flags.
  if (commit.startsWith("-") || ref.startsWith("-")) throw new VerifierError("params.commit and params.ref name objects, not options")
  const git = (...args: Array<string>) => run("git", ["-C", path, ...args], { timeout: timeoutMs })
  const resolve = async (what: string) => (await git("rev-parse", "--verify", "--quiet", `${what}^{commit}`).catch(() => ({ stdout: "" }))).stdout.trim() || null
  const [commitSha, refSha] = await Promise.all([resolve(commit), resolve(ref)])
  if (commitSha === null || refSha === null) return { repo: name, commit, ref, commit_sha: commitSha, ref_sha: refSha, is_ancestor: false }
  const isAncestor = await git("merge-base", "--is-ancestor", commitSha, refSha).then(
    () => true,
    (e: { code?: number }) => {
      if (e.code === 1) return false
      throw new VerifierError(`git merge-base failed in ${name}: ${String(e)}`)
    }
  )
  return { repo: name, commit, ref, commit_sha: commitSha, ref_sha: refSha, is_ancestor: isAncestor }
}
