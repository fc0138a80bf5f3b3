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

/** A commit named by its content: a full object id (SHA-1 or SHA-256), never a name that can move. */
const FullObjectId = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

/**
 * `git-ancestry`: is commit `commit` an ancestor of ref `ref` in repository `repo`? `repo` is a
 * name the verifier's config maps to a path it may read (a contract never names a path). Evidence
 * binds content: `commit` must be a full commit id (a branch, a tag or an abbreviation can point
 * elsewhere once checked, so what runs would not be what was checked), and `read.commit` is the id
 * git resolved, so a term expecting `commit: "{args.commit}"` is met only by a call that carries
 * that id. `ref` (the branch the commit must be on) is read as it is at the check. Reads both
 * objects' full ids and the answer of `git merge-base --is-ancestor`.
 */
export const gitAncestry = (repos: Readonly<Record<string, string>>, timeoutMs: number) => async (params: JsonObject): Promise<JsonObject> => {
  const name = str(params, "repo")
  const path = repos[name]
  if (path === undefined) throw new VerifierError(`params.repo: no repository '${name}' in this verifier's config`)
  const commit = str(params, "commit")
  const ref = str(params, "ref")
  // Arguments that look like options are refused: they name objects, never flags.
  if (commit.startsWith("-") || ref.startsWith("-")) throw new VerifierError("params.commit and params.ref name objects, not options")
  if (!FullObjectId.test(commit)) throw new VerifierError(`params.commit: '${commit.slice(0, 80)}' is not a full commit id (40 or 64 lowercase hex digits): a branch, tag or abbreviation may point at another commit once checked`)
  const git = (...args: Array<string>) => run("git", ["-C", path, ...args], { timeout: timeoutMs })
  const resolve = async (what: string) => (await git("rev-parse", "--verify", "--quiet", `${what}^{commit}`).catch(() => ({ stdout: "" }))).stdout.trim() || null
  const [commitSha, refSha] = await Promise.all([resolve(commit), resolve(ref)])
  // Not a commit of this repository: nothing to vouch for (the read says so, with what was asked).
  if (commitSha === null || refSha === null) return { repo: name, commit, ref, commit_sha: commitSha, ref_sha: refSha, is_ancestor: false }
  const isAncestor = await git("merge-base", "--is-ancestor", commitSha, refSha).then(
    () => true,
    (e: { code?: number }) => {
      if (e.code === 1) return false
      throw new VerifierError(`git merge-base failed in ${name}: ${String(e)}`)
    }
  )
  return { repo: name, commit: commitSha, ref, commit_sha: commitSha, ref_sha: refSha, is_ancestor: isAncestor }
}
