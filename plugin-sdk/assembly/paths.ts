// POSIX path canonicalization against a workspace root, shared by path-canon and write-scope.
// Pure string work: no filesystem, so symlinks are not resolved (a tool that follows links must
// confine itself; this only decides what the call says).

/** A canonical path, or why there is none. */
export class CanonicalPath {
  constructor(public ok: bool, public path: string, public error: string, public inside: bool) {}
}

/** `/a//b/./c/..` -> `/a/b`; `..` at the root stays at the root. `p` must be absolute. */
export function normalizeAbsolute(p: string): string {
  const parts = p.split("/")
  const out = new Array<string>()
  for (let i = 0; i < parts.length; i++) {
    const s = parts[i]
    if (s.length == 0 || s == ".") continue
    if (s == "..") {
      if (out.length > 0) out.pop()
      continue
    }
    out.push(s)
  }
  return "/" + out.join("/")
}

/** True when `p` (canonical) is `root` or below it. */
export function isInside(root: string, p: string): bool {
  if (root == "/") return true
  return p == root || p.startsWith(root + "/")
}

/**
 * Canonicalizes `path` against `workspace` (itself made canonical): a relative path is taken
 * from the workspace. Refuses an empty path and a NUL byte (a C-string truncation trick).
 * `inside` says whether the result is within the workspace; `..` cannot climb above `/`.
 */
export function canonicalPath(workspace: string, path: string): CanonicalPath {
  if (path.length == 0) return new CanonicalPath(false, "", "path is empty", false)
  if (path.indexOf("\0") >= 0) return new CanonicalPath(false, "", "path contains a NUL byte", false)
  const root = normalizeAbsolute(workspace.length == 0 ? "/" : workspace)
  const joined = path.startsWith("/") ? path : root + "/" + path
  const canonical = normalizeAbsolute(joined)
  return new CanonicalPath(true, canonical, "", isInside(root, canonical))
}
