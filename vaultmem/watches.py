"""What the daemon watches, and whether the watch holds: a recursive watch of each vault root
(pruned of excluded directories: watching.py), a watch of each directory outside the vaults where
notes that are symlinks really live (links.py), the roots looked at every few seconds (gone,
moved aside, back), and the watches counted against the directories they must cover (the
kernel's per-user limit skips the rest without a word).

Events become work for the writer through two callables, `on_path(vault, rel)` and
`on_reconcile(reason)`: nothing here reads a note or touches the index. Owned by the daemon
(daemon.py), which starts and stops it and hands it the scheduler for its checks.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Callable

from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirMovedEvent, FileClosedEvent, FileCreatedEvent,
                             FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEvent,
                             FileSystemEventHandler)

from .config import Settings, Vault
from .links import LinkMap
from .scan import dir_excluded, is_note_path, is_under, matches, relpath_in
from .watching import (PRUNES, RAISE_WATCH_LIMIT, directories_under, inotify_watches, make_observer, root_identity,
                       vault_pruner, vault_pruners, watch_limit)

log = logging.getLogger("vaultmem.daemon")

WATCH_RECOUNT_SECONDS = 0.5
# Directories outside the vaults watched for notes that are symlinks (links.py): a watch each,
# and watchdog runs a thread for each. Links past this many are found by the periodic reconcile,
# and the log and status say so. A dotfiles setup links into one or two directories.
MAX_LINK_WATCHES = 32
# Each vault root is looked at this often: gone, moved aside, or replaced by another directory
# (a fresh clone in its place). watchdog reports none of these when the root itself moves (its
# watch follows the moved directory), so a stat of each root is the one sure way.
ROOT_CHECK_SECONDS = 2.0

# What the watch asks the kernel for. Reads are left out (watchdog's default includes IN_OPEN and
# IN_CLOSE_NOWRITE): every walk of a directory tree, by the daemon's own reconcile or by watchdog's
# re-watch after an inotify queue overflow, raised four events per directory. At a few thousand
# directories (a .venv, node_modules) one walk overflowed the kernel's queue (16,384 events) again,
# and the daemon went round overflow -> re-watch and reconcile -> overflow for good, at 100% CPU.
# A directory's own modify and attribute events are left out too (its entries' events say it all).
WATCHED_EVENTS = [FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileMovedEvent, FileDeletedEvent,
                  DirCreatedEvent, DirMovedEvent, DirDeletedEvent]


def _event_paths(event: FileSystemEvent):
    """The paths an event names (a move: both), as str."""
    for raw in (event.src_path, getattr(event, "dest_path", "")):
        if raw:
            yield raw.decode() if isinstance(raw, bytes) else raw


def concerns(vault: Vault, rel: str, is_directory: bool, include: tuple[str, ...], exclude: tuple[str, ...],
             imported: frozenset[str] = frozenset()) -> bool:
    """Whether an event at vault path `rel` is the writer's to look at: a directory not
    excluded (its notes), a note path, or a file a CLAUDE.md imports."""
    if is_directory:
        return not dir_excluded(vault, rel, exclude)
    return is_note_path(vault, rel, include, exclude) or rel in imported


class _OverflowWatch(logging.Handler):
    """watchdog reports a lost-events inotify overflow only as a log warning: turn it into a
    reconcile."""

    def __init__(self, on_reconcile: Callable[[str], object]):
        super().__init__(logging.WARNING)
        self.on_reconcile = on_reconcile

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.on_reconcile("inotify queue overflowed")


class _Events(FileSystemEventHandler):
    def __init__(self, watches: "Watches", vault: Vault):
        self.watches, self.vault = watches, vault
        cfg = watches.settings.index
        self.include, self.exclude = cfg.include, cfg.exclude

    def on_any_event(self, event: FileSystemEvent) -> None:
        w = self.watches
        for path in _event_paths(event):
            w.linked_event(path, event.is_directory)  # a target of a note that is a link
            rel = relpath_in(self.vault, path)
            if not rel or rel == "." or not self.vault.owns(rel):
                continue  # the root itself (check_roots looks after it), or a nested vault's
            if concerns(self.vault, rel, event.is_directory, self.include, self.exclude, w.imported(self.vault.name)):
                w.on_path(self.vault.name, rel)
            elif not event.is_directory and (w.links.is_linked_dir(self.vault.name, rel) or (
                    isinstance(event, (FileCreatedEvent, FileMovedEvent))
                    and not matches(self.vault.globbed(rel), self.exclude)
                    and os.path.islink(path) and os.path.isdir(path))):
                # a symlink to a folder of notes, made or removed: the event says a file
                w.on_path(self.vault.name, rel)


class _LinkEvents(FileSystemEventHandler):
    """Events in a directory outside the vaults where notes that are symlinks really live."""

    def __init__(self, watches: "Watches"):
        self.watches = watches

    def on_any_event(self, event: FileSystemEvent) -> None:
        for path in _event_paths(event):
            self.watches.linked_event(path, event.is_directory)


class Watches:
    """The daemon's watches of `vaults` (name -> Vault), their link targets, and their status."""

    def __init__(self, settings: Settings, vaults: dict[str, Vault], on_path: Callable[[str, str], None],
                 on_reconcile: Callable[[str], object], imported: Callable[[str], frozenset[str]]):
        """`imported(vault)`: the files its CLAUDE.md files import, which are notes too."""
        self.settings = settings
        self.vaults = vaults
        self.on_path, self.on_reconcile, self.imported = on_path, on_reconcile, imported
        self.links = LinkMap()  # notes that are symlinks, or in a symlinked folder: where they live
        self.observer: Any = None  # watching.make_observer(), once started
        self.scheduler: Any = None  # the daemon's, for the unwatched reconcile (check)
        self.status: dict[str, Any] | None = None  # watches held against directories (the daemon's status)
        self._watched_roots: dict[str, tuple[int, int]] = {}  # vault -> the root directory watched
        self._lock = threading.RLock()
        self._link_watches: dict[tuple[str, bool], Any] = {}  # (real directory, recursive) -> watch
        self._links_unwatched = 0  # directories past MAX_LINK_WATCHES
        self.overflow = _OverflowWatch(on_reconcile)

    # -------------------------------------------------------------- life cycle

    def start(self) -> None:
        """Watch the vaults (and hear of watchdog's overflow warnings) from now on."""
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).addHandler(self.overflow)
        self.observer = make_observer()
        self.schedule()
        self.observer.start()

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()

    def join(self) -> None:
        if self.observer is not None:
            self.observer.join(timeout=5)
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).removeHandler(self.overflow)

    def schedule(self) -> None:
        assert self.observer is not None
        watched = {}
        for v in self.vaults.values():
            ident = root_identity(v.root)
            if ident is not None:
                self.observer.schedule(_Events(self, v), str(v.root), recursive=True, event_filter=WATCHED_EVENTS,
                                       pruned=vault_pruner(v, self.settings.index.exclude))
                watched[v.name] = ident
            else:
                log.warning("vault %s: %s is not a directory; not watched until it is", v.name, v.root)
        self._watched_roots = watched
        self._link_watches = {}  # gone with the observer's other watches (unschedule_all)
        self.watch_links()

    # -------------------------------------------------------------- notes that are symlinks

    def linked_event(self, path: str, is_directory: bool) -> None:
        """An event at a real path where notes that are symlinks live (links.py): look at those
        notes again."""
        cfg = self.settings.index
        for name, rel in self.links.notes_at(path):
            v = self.vaults.get(name)
            if v is not None and v.owns(rel) and concerns(v, rel, is_directory, cfg.include, cfg.exclude,
                                                          self.imported(name)):
                self.on_path(name, rel)

    def watch_links(self) -> None:
        """Watch the directories outside the vaults where notes that are symlinks really live
        (a vault's own watch covers those inside it), and stop watching those no note links to
        any more. A directory watched anew has its notes looked at once: an edit may have
        landed between the scan that found the link and this watch."""
        if self.observer is None:
            return
        with self._lock:
            roots = [str(v.root) for v in self.vaults.values()]
            wanted = self.links.directories()
            tops = roots + [d for d, recursive in wanted.items() if recursive]
            wanted = {d: r for d, r in wanted.items()
                      if not any(d != t and is_under(d, t) for t in tops) and d not in roots and os.path.isdir(d)}
            keep = sorted(wanted.items())[:MAX_LINK_WATCHES]
            unwatched = len(wanted) - len(keep)
            for spec in [s for s in self._link_watches if s not in keep]:
                try:
                    self.observer.unschedule(self._link_watches.pop(spec))
                except (KeyError, OSError):
                    pass
                log.info("no longer watching %s: no note links there", spec[0])
            for spec in keep:
                if spec in self._link_watches:
                    continue
                try:
                    self._link_watches[spec] = self.observer.schedule(
                        _LinkEvents(self), spec[0], recursive=spec[1], event_filter=WATCHED_EVENTS,
                        pruned=self._linked_dir_excluded if spec[1] else None)
                except OSError as err:
                    log.warning("cannot watch %s, where symlinked notes live (%s): their edits are found by the "
                                "periodic reconcile", spec[0], err)
                    continue
                log.info("watching %s%s: notes in the vaults are symlinks to it", spec[0], " and below" if spec[1] else "")
                for name, rel in self.links.notes_in(spec[0]):
                    self.on_path(name, rel)
            if unwatched and unwatched != self._links_unwatched:
                log.warning("symlinked notes live in %d directories outside the vaults; %d are watched, edits in the "
                            "other %d are found by the periodic reconcile", len(wanted), len(keep), unwatched)
            self._links_unwatched = unwatched
            if self.status is not None:
                self.status.update(self._link_status())

    def _linked_dir_excluded(self, path: str) -> bool:
        """Whether a directory below a symlinked folder of notes (`memory -> ~/notes`, a git
        checkout) is excluded at every place it appears in the vaults: its watch prunes it, as
        a vault's own watch prunes the vault's excluded directories."""
        places, exclude = self.links.notes_at(path), self.settings.index.exclude
        return bool(places) and all(name in self.vaults and dir_excluded(self.vaults[name], rel, exclude)
                                    for name, rel in places)

    def _link_status(self) -> dict[str, int]:
        return {"outside": len(self._link_watches), "outside_unwatched": self._links_unwatched}

    # -------------------------------------------------------------- does the watch hold

    def check_roots(self) -> None:
        """A vault root gone, moved aside, back, or replaced: check the watches now."""
        if any(root_identity(v.root) != self._watched_roots.get(n) for n, v in self.vaults.items()):
            self.check()

    def check(self, rewatch: bool = True) -> None:
        """Is every directory of the vaults watched? watchdog skips, without a word, each
        subdirectory it cannot watch, also when the kernel's inotify watch limit
        (fs.inotify.max_user_watches, shared by all of this user's programs) is reached; and a
        vault root that is deleted or moved is not watched again when a directory is back in
        its place. Edits there would wait for the next periodic reconcile. Count the watches
        held against the directories the vaults have; when short, say so (log, status), and
        every [daemon] unwatched_seconds check again and reconcile. A check that finds the watch
        short or a root changed (`rewatch`) watches the vaults afresh and reconciles: that
        takes once the limit is raised or the root is back. Missing roots show in status."""
        with self._lock:  # the scheduler may run two checks at once
            self._check(rewatch)

    def _check(self, rewatch: bool) -> None:
        assert self.observer is not None and self.scheduler is not None
        if inotify_watches() is None:  # not Linux: nothing to count
            return
        now = {n: root_identity(v.root) for n, v in self.vaults.items()}
        need, held = self._count([v for n, v in self.vaults.items() if now[n] is not None], list(self._link_watches))
        # a root gone, back, or replaced: its watch died, is missing, or follows the old directory
        differs = {n for n in self.vaults if now[n] != self._watched_roots.get(n)}
        if rewatch and (held < need or differs):
            self.observer.unschedule_all()
            self.schedule()
            held = inotify_watches() or 0
            self.on_reconcile("watched afresh")  # what changed while unwatched
            back = sorted(n for n in differs if now[n] is not None)
            if back:
                log.info("vault %s is back: watching it again", ", ".join(back))
        missing = sorted(n for n in self.vaults if now[n] is None)
        was_short = self.status is not None and self.status["watched"] < self.status["directories"]
        self.status = {"watched": held, "directories": need, "complete": held >= need and not missing,
                       "limit": watch_limit(), "missing": missing, **self._link_status()}
        if held < need and not was_short:  # said once, when it begins
            log.warning("only %d of the vaults' %d directories are watched: the inotify watch limit "
                        "(fs.inotify.max_user_watches = %s) is reached; edits elsewhere are picked up by "
                        "a reconcile every %.0f s. Raise it: %s",
                        held, need, self.status["limit"], self.settings.daemon.unwatched_seconds, RAISE_WATCH_LIMIT)
            self.scheduler.add_job(self._unwatched_tick, "interval", seconds=self.settings.daemon.unwatched_seconds,
                                   id="unwatched-reconcile", replace_existing=True)
        elif held >= need and was_short:
            log.info("all %d directories of the vaults are watched again", need)
            self.scheduler.remove_job("unwatched-reconcile")

    def _count(self, roots: list[Vault], links: Sequence[tuple[str, bool]] = ()) -> tuple[int, int]:
        """(directories, watches held), for the vaults and the watched `links` directories
        (real directory, recursive). Directories made or removed while they are counted
        (an `npm install`) can make the watch look short for a moment: a short count is taken
        again, once, after WATCH_RECOUNT_SECONDS."""
        pruned = {d: self._linked_dir_excluded for d, r in links if r} if PRUNES else {}
        pruned.update(vault_pruners(roots, self.settings.index.exclude))

        def count() -> tuple[int, int]:
            need = directories_under([str(v.root) for v in roots] + [d for d, r in links if r],
                                     [d for d, r in links if not r], pruned)
            return need, inotify_watches() or 0  # after the walk: watchdog adds new ones as it goes

        need, held = count()
        if held < need:
            time.sleep(WATCH_RECOUNT_SECONDS)
            need, held = count()
        return need, held

    def _unwatched_tick(self) -> None:
        self.check()  # watched afresh, and reconciled, once the limit is raised
        if self.status and self.status["watched"] < self.status["directories"]:  # still at the watch limit
            self.on_reconcile("vault not wholly watched")
