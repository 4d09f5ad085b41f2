"""Which files the vaults' CLAUDE.md files import: Claude Code reads `@path` imports into the
agent's context with the CLAUDE.md itself (`See @CONTRIBUTING.md`, `@docs/git.md`), as Gemini
CLI does a GEMINI.md's, so vaultmem indexes those files as notes too, whatever the include globs
say.

Pure path work over what the catalog keeps of each note (`Note.imports`, the paths as written,
found by notes.find_imports): nothing here reads a note or touches the index. As in Claude Code
a relative path is taken from the importing file's directory, `~/` from the home directory, and
imports are followed from CLAUDE.md, CLAUDE.local.md, AGENTS.md, GEMINI.md and rule files
through at most MAX_DEPTH hops. An imported file is a note of the vault that holds it (the
innermost), which need not be the importer's: a project's `@~/.claude/my-project.md` is one of
the ~/.claude vault's. A file in no vault, or under an excluded path, is no note.
"""

from __future__ import annotations

import os
import posixpath

from .agents import GEMINI_MD, reads_imports
from .config import Vault
from .scan import matches, relpath_in

MAX_DEPTH = 5  # hops, as Claude Code follows them


def locate(vaults: list[Vault], vault: Vault, importer: str, raw: str) -> tuple[Vault, str] | None:
    """The vault and vault-relative POSIX path that `raw` names when written in the note at
    `importer` of `vault`: in that vault, or in the innermost of `vaults` that holds it (a
    project's `@~/.claude/my-project.md` is a file of the ~/.claude vault when that is one);
    None when no vault does."""
    if not raw.startswith("~") and not os.path.isabs(raw):  # most imports: no need to look further
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(importer), raw))
        if rel != "." and rel != ".." and not rel.startswith("../") and vault.owns(rel):
            return vault, rel
    full = os.path.expanduser(raw)
    if full.startswith("~"):  # ~user of no user
        return None
    full = os.path.normpath(os.path.join(str(vault.root), posixpath.dirname(importer), full))
    for path in dict.fromkeys((full, os.path.realpath(full))):  # a home reached through a symlink
        held = [(v, r) for v in vaults if (r := relpath_in(v, path)) is not None and r != "."]
        if held:
            owner, rel = max(held, key=lambda h: len(h[0].root.parts))
            return (owner, rel) if owner.owns(rel) else None
    return None


def outside(vaults: list[Vault], vault: Vault, importer: str, raws: tuple[str, ...]) -> list[str]:
    """Those of a note's imports that name a path in none of `vaults` (not indexed)."""
    if not reads_imports(vault.globbed(importer)):
        return []
    return [raw for raw in raws if locate(vaults, vault, importer, raw) is None]


def imported(vaults: list[Vault], imports: dict[str, dict[str, tuple[str, ...]]],
             exclude: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The files the vaults' CLAUDE.md (and GEMINI.md) files import, directly or through
    imported files: by vault and vault-relative path, each with the note that imports it first
    (its path, or `vault:path` when that note is in another vault). A file is a note of the
    vault that holds it, whichever vault the note importing it is in. `imports` is every note's
    imports as written, by vault and path.

    Claude Code's chains are followed first, a GEMINI.md one of them imports included (Claude
    Code loads it, and what it imports, which is shown as imported by the file that imported the
    GEMINI.md). A file only a GEMINI.md's chain reaches is given that GEMINI.md as its importer,
    however many hops away: Claude Code does not load it, and the hooks tell by the importer's
    name (loaded_with_claude_md)."""
    by_name = {v.name: v for v in vaults}
    readers = sorted((v.name, p) for v in vaults for p in imports.get(v.name, {}) if reads_imports(v.globbed(p)))
    geminis = [r for r in readers if posixpath.basename(r[1]) == GEMINI_MD]
    seen = set(readers) - set(geminis)
    out: dict[str, dict[str, str]] = {}
    Frontier = list[tuple[tuple[str, str], tuple[str, str] | None]]
    claude: Frontier = [(r, None) for r in readers if r not in geminis]
    gemini: Frontier = [(r, r) for r in geminis]
    for frontier, gemini_chains in ((claude, False), (gemini, True)):
        # (importer, the note to name as its imports' importer, or None to name the importer)
        if gemini_chains:
            seen.update(geminis)
        for _ in range(MAX_DEPTH):
            following: Frontier = []
            for (name, importer), label in frontier:
                for raw in imports.get(name, {}).get(importer, ()):
                    found = locate(vaults, by_name[name], importer, raw)
                    if found is None or (found[0].name, found[1]) in seen or matches(found[0].globbed(found[1]),
                                                                                     exclude):
                        continue
                    owner, rel = found
                    seen.add((owner.name, rel))
                    by, by_path = label or (name, importer)
                    out.setdefault(owner.name, {})[rel] = by_path if owner.name == by else f"{by}:{by_path}"
                    if gemini_chains:
                        following.append(((owner.name, rel), label))
                    else:  # a GEMINI.md in Claude Code's chain: its imports named by its own importer
                        following.append(((owner.name, rel), (by, by_path) if posixpath.basename(rel) == GEMINI_MD
                                          else None))
            if not following:
                break
            frontier = following
    return out
