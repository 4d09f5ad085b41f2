"""Which notes are current: derived from note facts alone, so it is recomputed, never patched.

Within a chain's scope, notes that share a topic (compared after NFKC and case folding) form a
chain. A scope is a vault, but for what belongs to one project across vaults (Scopes): Claude
Code's memory of a project (~/.claude/projects/<slug>/) chains with the vault of that project,
and vaults the config says share topics chain together;
the newest (its date as notes.note_date reads it, else the file's mtime; ties broken on path) is
current and every other note of the chain is superseded by it. A note's `supersedes:` retires the
named topics or note paths explicitly, for as long as the retiring note exists. Nothing here reads
files or indexes.
"""

from __future__ import annotations

import functools
import posixpath
from typing import Callable, NamedTuple

from .agents import CLAUDE_SLUG_MAX, claude_slug
from .text import normalize

RULES = "1"  # bump when compute() derives other chains from the same facts: each index derives them again


class Facts(NamedTuple):
    """What supersession reads of a note. A named tuple: an `--as-of` query derives the chains
    from all of them, and on the 10,000-note bench vault making them as frozen dataclasses cost
    11 of the 49 ms that took."""

    key: str
    vault: str
    path: str
    topic: str | None
    date_ts: float | None
    mtime: float
    supersedes: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[float, str]:
        return (self.date_ts if self.date_ts is not None else self.mtime, self.path)


@functools.lru_cache(maxsize=1 << 16)  # chains are recomputed often; topics repeat
def topic_key(topic: str | None) -> str | None:
    if topic is None:
        return None
    t = normalize(topic).strip()
    return t or None


def path_candidates(ref: str, from_path: str) -> set[str]:
    ref = ref.strip().strip("[]").strip()
    out = set()
    for base in (ref, posixpath.join(posixpath.dirname(from_path), ref)):
        p = posixpath.normpath(base) if base else ""
        if p:
            out.add(p)
            if not p.endswith(".md"):
                out.add(p + ".md")
    return out


class Scopes:
    """Which chain scope a note is in: its vault's, but a note of Claude Code's own directory
    under projects/<slug>/ (the memory Claude Code keeps of one project) is in the scope of the
    served vault whose directory that slug names, and vaults the config says share topics
    (`[vaults] share_topics`) are one scope. `roots`: vault name -> its directory."""

    def __init__(self, roots: dict[str, str], claude_vault: str | None = None,
                 shared: tuple[tuple[str, ...], ...] = ()):
        self.of_vault = {name: name for name in roots}
        for group in shared:
            names = sorted(n for n in group if n in self.of_vault)
            for n in names:
                self.of_vault[n] = self.of_vault[names[0]]
        self.claude_vault = claude_vault
        # a slug over CLAUDE_SLUG_MAX is cut there, and Claude Code adds a hash: matched by its head
        self.by_slug = {claude_slug(root.rstrip("/"))[:CLAUDE_SLUG_MAX]: name for name, root in roots.items()
                        if name != claude_vault}

    def __call__(self, vault: str, path: str) -> str:
        if vault == self.claude_vault and path.startswith("projects/"):
            project = self.by_slug.get(path.split("/", 2)[1][:CLAUDE_SLUG_MAX])
            if project is not None:
                return self.of_vault.get(project, project)
        return self.of_vault.get(vault, vault)

    def stamp(self) -> str:
        """What the chains derived under these scopes (and these rules) depend on besides the
        notes' facts: equal stamps, equal chains from equal facts."""
        return repr((RULES, sorted(self.of_vault.items()), self.claude_vault, sorted(self.by_slug.items())))

    def describe(self, scope: str) -> str | None:
        """What a chain scope joins, when more than its own vault: the vaults that share its
        topics, and Claude Code's memory folder of its project (for --explain); else None."""
        parts = [n for n, sc in sorted(self.of_vault.items()) if sc == scope]
        parts += [f"{self.claude_vault}:projects/{slug}/" for slug, n in sorted(self.by_slug.items())
                  if self.of_vault.get(n, n) == scope]
        return " + ".join(parts) if len(parts) > 1 else None


def compute(notes: list[Facts], scope: Callable[[str, str], str] = lambda vault, path: vault
            ) -> dict[str, str | None]:
    """Map every note key to the key of the note that supersedes it, or None if current."""
    result: dict[str, str | None] = {n.key: None for n in notes}
    chains: dict[tuple[str, str], list[Facts]] = {}
    by_path: dict[tuple[str, str], Facts] = {}
    for n in notes:
        by_path[(n.vault, n.path)] = n
        t = topic_key(n.topic)
        if t is not None:
            chains.setdefault((scope(n.vault, n.path), t), []).append(n)
    for chain in chains.values():
        if len(chain) > 1:
            newest = max(chain, key=lambda n: n.order)
            for n in chain:
                if n is not newest:
                    result[n.key] = newest.key
    for n in sorted((n for n in notes if n.supersedes), key=lambda n: n.order):
        for ref in n.supersedes:
            targets: list[Facts] = list(chains.get((scope(n.vault, n.path), topic_key(ref) or ""), []))
            for cand in path_candidates(ref, n.path):
                if (n.vault, cand) in by_path:
                    targets.append(by_path[(n.vault, cand)])
            for target in targets:
                if target.key != n.key and result[target.key] is None:
                    result[target.key] = n.key
    return result
