"""Which files a vault's CLAUDE.md files import: Claude Code reads `@path` imports into the
agent's context with the CLAUDE.md itself (`See @AGENTS.md`, `@docs/git-instructions.md`), so
vaultmem indexes those files as notes of the vault too, whatever the include globs say.

Pure path work over what the catalog keeps of each note (`Note.imports`, the paths as written,
found by notes.find_imports): nothing here reads a note or touches the index. As in Claude Code
a relative path is taken from the importing file's directory, `~/` from the home directory, and
imports are followed from CLAUDE.md and CLAUDE.local.md through at most MAX_DEPTH hops. A file
outside the vault, under an excluded path or in a nested vault is not this vault's to index.
"""

from __future__ import annotations

import os
import posixpath

from .config import Vault
from .scan import matches, relpath_in

ROOTS = frozenset({"CLAUDE.md", "CLAUDE.local.md"})  # the files Claude Code reads imports from
MAX_DEPTH = 5  # hops, as Claude Code follows them
INSTRUCTION_FILES = frozenset({"claude.md", "agents.md", "memory.md"})  # instructions and indexes, not facts


def loaded_with_claude_md(path: str, imported_by: str | None) -> bool:
    """Whether Claude Code puts a note into every session itself: an instruction file
    (CLAUDE.md, AGENTS.md, a MEMORY.md index), or a file one of them imports."""
    return imported_by is not None or path.rsplit("/", 1)[-1].lower() in INSTRUCTION_FILES


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


def imported(vault: Vault, imports: dict[str, tuple[str, ...]], exclude: tuple[str, ...]) -> dict[str, str]:
    """The files the vault's CLAUDE.md files import, directly or through imported files, by
    vault-relative path, each with the note that imports it first. `imports` is every note's
    imports as written, by path."""
    frontier = sorted(p for p in imports if posixpath.basename(p) in ROOTS)
    seen = set(frontier)
    out: dict[str, str] = {}
    for _ in range(MAX_DEPTH):
        following: list[str] = []
        for importer in frontier:
            for raw in imports.get(importer, ()):
                rel = resolve(vault, importer, raw)
                if rel is None or rel in seen or not vault.owns(rel) or matches(rel, exclude):
                    continue
                seen.add(rel)
                out[rel] = importer
                following.append(rel)
        if not following:
            break
        frontier = following
    return out
