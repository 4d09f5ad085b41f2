"""Notes reached through a symlink, and where their bytes really live.

A vault's watch sees events in the vault's own directories, named by the paths it walked. A note
that is a symlink (`CLAUDE.md -> README.md` in a repository, `~/.claude/CLAUDE.md ->
~/dotfiles/CLAUDE.md`) changes when its target does, and that event names the target, which is
no note, or is in a directory nobody watches; a symlinked folder of notes
(`memory -> ~/Sync/memory`) is not entered by the watch at all. Left to the vault's watch,
such edits would wait for the periodic reconcile, 15 minutes by default.

LinkMap keeps, for each note path with a symlink on its way, the real file (a note that is a
link) or the real directory (the top-most symlinked directory above the note), answers which
note paths an event at a real path concerns, and says which directories must be watched for
them. It reads symlinks only, never a note; the daemon watches and indexes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

from .config import Vault
from .scan import is_under

Key = tuple[str, str]  # (vault name, vault-relative POSIX path)


class LinkMap:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[Key, str] = {}  # a note that is a symlink -> the real file
        self._dirs: dict[Key, str] = {}  # a symlinked directory holding notes -> the real directory
        self._by_file: dict[str, set[Key]] = {}
        self._by_dir: dict[str, set[Key]] = {}

    def reset(self, vault: Vault, rels: Iterable[str]) -> None:
        """Forget what is known of `vault` and look at all its note paths `rels` (after a full
        scan: every note the index knows, unreadable ones included)."""
        found = _resolve_all(vault, rels)
        with self._lock:
            for table, index in ((self._files, self._by_file), (self._dirs, self._by_dir)):
                for key in [k for k in table if k[0] == vault.name]:
                    _drop(table, index, key)
            self._add(vault.name, found)

    def update(self, vault: Vault, rels: Iterable[str]) -> list[Key]:
        """Look again at these paths of `vault` (notes, or directories as a whole), changed or
        gone. Returns the paths that are links to a new place (made, or pointed elsewhere): the
        caller reads them once more. Their target may have changed between the caller's read
        and this update, when no event of it could name them yet (`ln -sfn` to a file, then an
        edit of that file: the edit's event found no note)."""
        rels = list(rels)
        found = _resolve_all(vault, rels)
        with self._lock:
            moved = sorted((vault.name, rel) for table, items in zip((self._files, self._dirs), found)
                           for rel, real in items.items() if table.get((vault.name, rel)) != real)
            for rel in rels:  # a directory moved away takes its links with it
                for key in [k for k in self._files if k[0] == vault.name and is_under(k[1], rel)]:
                    _drop(self._files, self._by_file, key)
                for key in [k for k in self._dirs if k[0] == vault.name and is_under(k[1], rel)]:
                    if self._dirs[key] != _real_dir(vault, key[1]):  # no longer that link
                        _drop(self._dirs, self._by_dir, key)
            self._add(vault.name, found)
        return moved

    def _add(self, vault: str, found: tuple[dict[str, str], dict[str, str]]) -> None:
        files, dirs = found
        for table, index, items in ((self._files, self._by_file, files), (self._dirs, self._by_dir, dirs)):
            for rel, real in items.items():
                table[(vault, rel)] = real
                index.setdefault(real, set()).add((vault, rel))

    def notes_at(self, path: str) -> list[Key]:
        """The vault paths an event at the real, absolute `path` concerns: each note that is a
        link to it, and its place under each symlinked directory it lies in (a directory there
        stands for the notes under it)."""
        with self._lock:
            out = list(self._by_file.get(path, ()))
            if self._by_dir:
                head, tail = path, ""
                while True:
                    out.extend((vault, f"{rel}/{tail}" if tail else rel) for vault, rel in self._by_dir.get(head, ()))
                    parent = os.path.dirname(head)
                    if parent == head:
                        break
                    name = os.path.basename(head)
                    tail = f"{name}/{tail}" if tail else name
                    head = parent
        return out

    def paths(self) -> list[Key]:
        """Every note that is a symlink and every symlinked directory holding notes."""
        with self._lock:
            return sorted(set(self._files) | set(self._dirs))

    def is_linked_dir(self, vault: str, rel: str) -> bool:
        """Whether `rel` was a symlinked directory holding notes (its link removed or moved: the
        event says a file, and its notes are gone from that path)."""
        with self._lock:
            return (vault, rel) in self._dirs

    def notes_in(self, directory: str) -> list[Key]:
        """The vault paths whose real location is `directory` or in it: for a newly watched
        directory, what to look at once (an edit may have landed before the watch did)."""
        with self._lock:
            files = [k for real, keys in self._by_file.items() if is_under(real, directory) for k in keys]
            return files + [k for real, keys in self._by_dir.items() if is_under(real, directory) for k in keys]

    def directories(self) -> dict[str, bool]:
        """What to watch for these links: {real directory: recursive}. A symlinked directory is
        watched whole, the directory of a linked file alone. May include directories that a
        vault's own watch covers already; the caller leaves those out."""
        with self._lock:
            out = dict.fromkeys(self._by_dir, True)
            for real in self._by_file:
                out.setdefault(os.path.dirname(real), False)
        return out


def _resolve_all(vault: Vault, rels: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """({note rel: real file} for notes that are symlinks, {directory rel: real directory} for
    the top-most symlinked directory above each path, or the path itself when it is a symlink
    to a directory). One lstat a directory, and one a path or, for many paths, one listing of
    their directory (its entries' types come with the names: 10,000 notes took 34 ms of
    lstats, 7-13 ms so)."""
    root = str(vault.root)
    by_dir: dict[str, list[str]] = {}
    for rel in rels:
        by_dir.setdefault(rel.rpartition("/")[0], []).append(rel)
    files: dict[str, str] = {}
    dirs: dict[str, str] = {}
    is_link: dict[str, bool] = {}
    for head, names in by_dir.items():
        linked = _links_in(os.path.join(root, head) if head else root, head, names)
        for rel in linked:
            full = os.path.join(root, rel)
            if os.path.isdir(full):
                dirs[rel] = os.path.realpath(full)
            else:
                files[rel] = os.path.realpath(full)
        parts = head.split("/") if head else []
        for i in range(len(parts)):
            sub = "/".join(parts[: i + 1])
            if sub not in is_link:
                is_link[sub] = os.path.islink(os.path.join(root, sub))
            if is_link[sub]:
                dirs.setdefault(sub, os.path.realpath(os.path.join(root, sub)))
                break
    return files, dirs


LISTING_FROM = 16  # paths in one directory; fewer are looked at one by one


def _links_in(directory: str, head: str, rels: list[str]) -> list[str]:
    """The `rels` (all in `directory`, vault-relative `head`) that are symlinks: looked at one
    by one, or past LISTING_FROM of them, by listing the directory once."""
    if len(rels) <= LISTING_FROM:
        return [rel for rel in rels if os.path.islink(os.path.join(directory, rel.rpartition("/")[2]))]
    names = {rel.rpartition("/")[2] for rel in rels}
    try:
        with os.scandir(directory) as entries:
            return [f"{head}/{e.name}" if head else e.name for e in entries if e.name in names and e.is_symlink()]
    except OSError:  # the directory is gone: so are its notes, and no link is there
        return []


def _real_dir(vault: Vault, rel: str) -> str | None:
    full = os.path.join(str(vault.root), rel)
    return os.path.realpath(full) if os.path.islink(full) and os.path.isdir(full) else None


def _drop(table: dict[Key, str], index: dict[str, set[Key]], key: Key) -> None:
    real = table.pop(key, None)
    if real is not None:
        keys = index.get(real)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del index[real]
