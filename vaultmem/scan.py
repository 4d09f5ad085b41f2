"""Which files of a vault are notes: walk the vault, apply include/exclude globs, stat.

Everything here is about the file system and nothing about parsing or indexing. The scanner
never follows a directory symlink out of the vault twice (loops are cut); a note reached through
a symlink whose real path in the vault is a note path too is that note, found under its real
path only (else `docs/memory -> ../memory` indexed each note twice, once the daemon saw an
edit); and a note path it cannot stat (a dangling symlink) or that is no regular file (a named
pipe) is still returned, with the reason as its `problem`, so that the index lists it as
skipped like any other unreadable file instead of failing (or, for a pipe, waiting on it
forever).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from functools import lru_cache
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .config import Vault


class ScannedFile(NamedTuple):
    """A note file as the scan found it. A named tuple: a scan makes one per note, and a
    50,000-note restart spent 0.1 s making them as frozen dataclasses."""

    vault: str
    path: str  # POSIX, relative to the vault root
    abspath: str
    size: int
    mtime_ns: int
    problem: str | None = None  # why it cannot be read (a dangling symlink); size and mtime are the link's

    @property
    def key(self) -> str:
        return f"{self.vault}:{self.path}"


ANY_DIRS = "(?:.*/)?"  # what `**/` becomes: no directory, or any number of them


def _glob_source(pattern: str) -> str:
    """A glob with `**` (any number of directories) as a regex over POSIX paths."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(ANY_DIRS)
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out) + r"\Z"


@lru_cache(maxsize=256)
def _globs_regex(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex for any of the globs: a scan tests every file against the whole include and
    exclude lists, and one match call each, not one a glob, took a restart on 50,000 unchanged
    notes from ~0.5 s of glob tests to ~0.1 s. The globs that begin with `**/` (every default
    one) share that beginning once, `(?:.*/)?(?:a|b|...)`, the same paths: each alternative
    tried every way of skipping directories on its own, and the 50,000 paths' tests took 0.15
    s, now 0.04 s."""
    if not patterns:
        return None
    sources = [_glob_source(p) for p in patterns]
    shared = [s[len(ANY_DIRS):] for s in sources if s.startswith(ANY_DIRS)]
    own = [f"(?:{s})" for s in sources if not s.startswith(ANY_DIRS)]
    return re.compile("|".join(([f"{ANY_DIRS}(?:{'|'.join(shared)})"] if shared else []) + own))


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    regex = _globs_regex(tuple(patterns))
    return regex is not None and regex.match(path) is not None


def is_note_path(vault: Vault, rel: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    """Whether the globs make vault path `rel` a note path (seen as Vault.globbed shows it)."""
    return note_path_test(vault, include, exclude)(rel)


def note_path_test(vault: Vault, include: tuple[str, ...], exclude: tuple[str, ...]) -> Callable[[str], bool]:
    """is_note_path for the paths of one vault, the globs' regexes found once (a scan tests
    every file: finding them again each time, by the tuple of globs, was 0.03 s of a 50,000-note
    restart)."""
    wanted, unwanted, globbed = _globs_regex(tuple(include)), _globs_regex(tuple(exclude)), vault.globbed

    def test(rel: str) -> bool:
        path = globbed(rel)
        return wanted is not None and wanted.match(path) is not None and (unwanted is None or unwanted.match(path) is None)
    return test


def dir_excluded(vault: Vault, rel: str, exclude: tuple[str, ...]) -> bool:
    """Whether vault directory `rel` is pruned (neither walked nor watched): any path under it
    would be excluded by a `dir/**` pattern."""
    return matches(vault.globbed(rel) + "/x", tuple(p for p in exclude if p.endswith("/**")))


def scan_vault(vault: Vault, include: tuple[str, ...], exclude: tuple[str, ...],
               under: str = "") -> dict[str, ScannedFile]:
    """All note files of a vault (or of its subdirectory `under`) by key, unstattable ones
    (dangling symlinks) included with their `problem`; none under a nested vault's root."""
    found: dict[str, ScannedFile] = {}
    root = str(vault.root)
    walked: dict[bool, set[tuple[int, int]]] = {False: set(), True: set()}  # directories, by way: through a link?
    start = os.path.join(root, under) if under else root
    if not os.path.isdir(start) or not vault.owns(under):  # a missing root is the callers' to report (index.sync)
        return found
    linked = {start: _via_link(start)}  # directory path -> reached through a symlink
    is_note = note_path_test(vault, include, exclude)
    for dirpath, dirnames, filenames in os.walk(start, followlinks=True):
        via = linked.pop(dirpath, True)
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in walked[via]:  # a second way in of the same kind (a loop is cut below)
            dirnames[:] = []
            continue
        walked[via].add(ident)
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        dirnames[:] = sorted(d for d in dirnames if vault.owns(f"{rel_dir}/{d}".lstrip("/"))
                             and not dir_excluded(vault, f"{rel_dir}/{d}".lstrip("/"), exclude))
        for d in list(dirnames):
            sub = os.path.join(dirpath, d)
            if os.path.islink(sub) and is_under(os.path.realpath(dirpath), os.path.realpath(sub)):
                dirnames.remove(d)  # a link to the directory itself or above it: a loop
                continue
            # a link into a directory also walked its own way is walked too: its notes whose real
            # paths are notes are left to those (_stat), the others are found only this way
            linked[sub] = via or os.path.islink(sub)
        within = os.path.join(dirpath, "")  # the directory's path and a separator, once for its files
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not is_note(rel):
                continue
            s = _stat(vault, rel, within + name, via, include, exclude)
            if s is not None:
                found[s.key] = s
    return found


def stat_file(vault: Vault, rel: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> ScannedFile | None:
    """The note file at `rel`, or None when there is none there (gone, a directory, or a link to
    a note the vault has under its real path)."""
    full = os.path.join(str(vault.root), rel)
    return _stat(vault, rel, full, _via_link(os.path.dirname(full)), include, exclude)


def _via_link(directory: str) -> bool:
    """Whether a directory is reached through a symlink (its real path is another)."""
    return os.path.realpath(directory) != os.path.abspath(directory)


def _stat(vault: Vault, rel: str, full: str, via_link: bool, include: tuple[str, ...],
          exclude: tuple[str, ...]) -> ScannedFile | None:
    try:
        st = os.lstat(full)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(full)
        except OSError as err:  # a link whose target is missing is a note that cannot be read, not a note gone
            reason = "symlink loop" if err.errno == errno.ELOOP else "dangling symlink"
            return ScannedFile(vault.name, rel, full, st.st_size, st.st_mtime_ns, reason)
        via_link = True
    if via_link:
        real, root = os.path.realpath(full), str(vault.root)
        if is_under(real, root):
            real_rel = os.path.relpath(real, root).replace(os.sep, "/")
            if real_rel != rel and is_note_path(vault, real_rel, include, exclude):
                return None  # the same note, indexed under its real path
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):  # never opened: reading a named pipe waits for a writer
        kind = _SPECIAL.get(stat.S_IFMT(st.st_mode), "a special file")
        return ScannedFile(vault.name, rel, full, 0, st.st_mtime_ns, f"not a regular file ({kind})")
    return ScannedFile(vault.name, rel, full, st.st_size, st.st_mtime_ns)


_SPECIAL = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a device",
            stat.S_IFBLK: "a device"}


def is_under(path: str, top: str) -> bool:
    """`path` is `top` or inside it (absolute, normalised paths)."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def relpath_in(vault: Vault, abspath: str) -> str | None:
    """The vault-relative POSIX path of an absolute path, or None when it is outside."""
    try:
        rel = Path(os.path.abspath(abspath)).relative_to(vault.root)
    except ValueError:
        return None
    return rel.as_posix()
