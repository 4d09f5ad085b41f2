"""Which files a vault's CLAUDE.md files import: Claude Code reads `@path` imports into the
agent's context with the CLAUDE.md itself (`See @CONTRIBUTING.md`, `@docs/git.md`), so vaultmem
indexes those files as notes of the vault too, whatever the include globs say.

Pure path work over what the catalog keeps of each note (`Note.imports`, the paths as written,
found by notes.find_imports): nothing here reads a note or touches the index. As in Claude Code
a relative path is taken from the importing file's directory, `~/` from the home directory, and
imports are followed from CLAUDE.md, CLAUDE.local.md, AGENTS.md and rule files through at most
MAX_DEPTH hops. A file outside the vault, under an excluded path or in a nested vault is not
this vault's.
"""

from __future__ import annotations

import os
import posixpath

from .config import Vault
from .scan import matches, relpath_in

MAX_DEPTH = 5  # hops, as Claude Code follows them
INSTRUCTION_FILES = frozenset({"claude.md", "claude.local.md", "agents.md", "memory.md"})  # not facts


def is_rule(path: str) -> bool:
    """A rule file of Claude Code's (`.claude/rules/**/*.md`), read like a CLAUDE.md. Like the
    helpers below, it takes the path as the globs see it (Vault.globbed)."""
    return path.startswith(".claude/rules/") or "/.claude/rules/" in path


def reads_imports(path: str) -> bool:
    """Whether Claude Code follows the imports of the file at `path`: a CLAUDE.md, a
    CLAUDE.local.md, an AGENTS.md (read in place of a CLAUDE.md, or through a `CLAUDE.md ->
    AGENTS.md` link) or a rule file (an imported file's own imports are followed too)."""
    return posixpath.basename(path) in ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md") or is_rule(path)


def loaded_with_claude_md(path: str, imported_by: str | None) -> bool:
    """Whether Claude Code puts a note into the session itself: an instruction file
    (CLAUDE.md, CLAUDE.local.md, AGENTS.md, a MEMORY.md index, a rule), or a file one imports."""
    return imported_by is not None or posixpath.basename(path).lower() in INSTRUCTION_FILES or is_rule(path)


def resolve(vault: Vault, importer: str, raw: str) -> str | None:
    """The vault-relative POSIX path `raw` names when written in the note at `importer`, or
    None when that is outside the vault."""
    if raw.startswith("~"):
        raw = os.path.expanduser(raw)
        if raw.startswith("~"):  # ~user of no user
            return None
    if os.path.isabs(raw):
        full = os.path.normpath(raw)
        rel = relpath_in(vault, full)
        if rel is None:  # the home directory through a symlink (vault roots are real paths)
            rel = relpath_in(vault, os.path.realpath(full))
        return rel if rel not in (None, ".") else None
    rel = posixpath.normpath(posixpath.join(posixpath.dirname(importer), raw))
    return None if rel == "." or rel == ".." or rel.startswith("../") else rel


def outside(vault: Vault, importer: str, raws: tuple[str, ...]) -> list[str]:
    """Those of a note's imports that name a path outside its vault (not indexed)."""
    if not reads_imports(vault.globbed(importer)):
        return []
    return [raw for raw in raws if resolve(vault, importer, raw) is None]


def imported(vault: Vault, imports: dict[str, tuple[str, ...]], exclude: tuple[str, ...]) -> dict[str, str]:
    """The files the vault's CLAUDE.md files import, directly or through imported files, by
    vault-relative path, each with the note that imports it first. `imports` is every note's
    imports as written, by path."""
    frontier = sorted(p for p in imports if reads_imports(vault.globbed(p)))
    seen = set(frontier)
    out: dict[str, str] = {}
    for _ in range(MAX_DEPTH):
        following: list[str] = []
        for importer in frontier:
            for raw in imports.get(importer, ()):
                rel = resolve(vault, importer, raw)
                if rel is None or rel in seen or not vault.owns(rel) or matches(vault.globbed(rel), exclude):
                    continue
                seen.add(rel)
                out[rel] = importer
                following.append(rel)
        if not following:
            break
        frontier = following
    return out
