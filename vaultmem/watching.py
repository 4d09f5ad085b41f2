"""The daemon's watch of a vault: watchdog's recursive inotify watch, except that it never
enters a directory the vault excludes (`.git`, `node_modules`, `.venv`, ...).

watchdog watches every directory below a root, one inotify watch each, and reports every
event in them. In a project vault most directories are ones no note can be in: this
repository's working tree has 1,120, 951 of them in `.venv`. Each takes a watch from the
per-user limit that every editor and watcher shares, and a `pip install`, `npm install` or
`git gc` there floods the daemon with events it only throws away (and overflows the
kernel's queue, which costs a full reconcile). The scan prunes excluded directories (scan.dir_excluded); the watch
now prunes the same ones, so what is watched is what can hold notes.

Nothing here decides what is a note or reads one. It reaches into watchdog's inotify classes
(7.1: InotifyWatchGroup's two directory walks and its move of watches, InotifyEmitter's start
and its report of a directory moved in); where they are not as expected (another platform,
another version), `make_observer` returns watchdog's own observer, which watches everything
as before: pruning saves watches and events, and correctness never depends on it (events in
excluded directories are dropped anyway).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable

from watchdog.observers import Observer

from .config import Vault
from .scan import dir_excluded

Pruned = Callable[[str], bool]  # absolute directory path -> never watched

try:
    from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
    from watchdog.events import DirCreatedEvent, DirModifiedEvent, DirMovedEvent
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, Mask
    from watchdog.observers.inotify_move_event_grouper import PathedInotifyEvent
    PRUNES = all(callable(getattr(InotifyWatchGroup, name, None))
                 for name in ("_add_all_callbacks", "_recursive_simulate", "_add_callback", "_move_watches",
                              "_remove_callbacks")) \
        and all(callable(getattr(InotifyEmitter, name, None))
                for name in ("on_thread_start", "build_and_queue_event", "_decode_path"))
except ImportError:  # not Linux
    PRUNES = False


def vault_pruner(vault: Vault, exclude: tuple[str, ...]) -> Pruned:
    """Whether a directory of `vault` is excluded, as the scan decides it (its root never is)."""
    root = str(vault.root)

    def pruned(path: str) -> bool:
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        return rel != "." and not rel.startswith("../") and dir_excluded(vault, rel, exclude)
    return pruned


def vault_pruners(vaults, exclude: tuple[str, ...]) -> dict[str, Pruned]:
    """{root: pruner} for these vaults' watches, as `directories_under` counts them; empty
    where watchdog's own observer watches everything (no pruning here)."""
    return {str(v.root): vault_pruner(v, exclude) for v in vaults} if PRUNES else {}


def walk_watched(root: str, pruned: Pruned | None = None):
    """Every directory a recursive watch of `root` holds: `root` and the directories below it,
    symlinked ones not entered (as watchdog does), pruned ones and all below them left out."""
    for path, dirnames, _ in os.walk(root):
        if pruned is not None:
            dirnames[:] = [d for d in dirnames if not pruned(os.path.join(path, d))]
        yield path


def make_observer():
    """An observer whose `schedule` takes `pruned=`: watchdog's inotify observer with pruning
    where its internals are as expected, else watchdog's default observer (`pruned` ignored)."""
    return _PruningObserver() if PRUNES else _PlainObserver()


class _PlainObserver(Observer):  # type: ignore[misc,valid-type]
    def schedule(self, event_handler, path, *, pruned: Pruned | None = None, **kwargs):
        return super().schedule(event_handler, path, **kwargs)


if PRUNES:
    @dataclass
    class _PrunedGroup(InotifyWatchGroup):
        """watchdog 7.1's InotifyWatchGroup with its two walks pruned (each mirrors the
        original line for line apart from the pruning, marked) and its move of watches
        followed by the pruning."""

        pruned: Pruned = field(default=lambda path: False)

        def _prune(self, path: bytes) -> bool:
            return path != self.path and self.pruned(os.fsdecode(path))

        def _add_all_callbacks(self, path: bytes) -> None:
            if self._prune(path):  # pruned: a directory made or moved in with an excluded name
                return
            is_dir = os.path.isdir(path)
            self._add_callback(path)
            if is_dir and self.is_recursive:
                for root, dirnames, _ in os.walk(path, followlinks=self.follow_symlink):
                    dirnames[:] = [d for d in dirnames if not self._prune(os.path.join(root, d))]  # pruned
                    for dirname in dirnames:
                        full_path = os.path.join(root, dirname)
                        if not self.follow_symlink and os.path.islink(full_path):
                            continue
                        self._add_callback(full_path)

        def _move_watches(self, move_src_path: bytes, move_dst_path: bytes) -> bool:
            """As watchdog's; and a watched directory renamed within the watch to an excluded
            name (`mv vendor node_modules`) has its watches dropped, as if it had been there
            from the start. The move itself is still reported (its notes leave the index). A
            directory moved into one that is not watched (Obsidian's .trash/) never gets here:
            inotify tells only that it left, and its watches stay until the next rewatch."""
            moved = super()._move_watches(move_src_path, move_dst_path)
            if moved and self._prune(move_dst_path):
                below = move_dst_path + os.sep.encode()
                self._remove_callbacks([wd for path, wd in self._active_callbacks_by_path.items()
                                        if path == move_dst_path or path.startswith(below)])
            return moved

        def _recursive_simulate(self, src_path: bytes) -> list:
            if self._prune(src_path):  # pruned: nothing below it is watched, nothing to report
                return []
            out = []
            for root, dirnames, filenames in os.walk(src_path, followlinks=self.follow_symlink):
                dirnames[:] = [d for d in dirnames if not self._prune(os.path.join(root, d))]  # pruned
                wd_root = self._active_callbacks_by_path.get(root)
                if wd_root is None:
                    continue
                for dirname in dirnames:
                    out.append(InotifyEvent(wd_root, Mask(InotifyConstants.IN_CREATE | InotifyConstants.IN_ISDIR), 0,
                                            dirname))
                for filename in filenames:
                    out.append(InotifyEvent(wd_root, InotifyConstants.IN_CREATE, 0, filename))
            return out

    class _PrunedEmitter(InotifyEmitter):
        def __init__(self, event_queue, watch, *, pruners: dict[str, Pruned], **kwargs):
            super().__init__(event_queue, watch, **kwargs)
            self._pruned = pruners.get(watch.path)

        def build_and_queue_event(self, event, *, full_events: bool = False) -> None:
            """As watchdog's, except for a directory moved in from outside the watch whose path is
            pruned: its own event only, not one for everything below it (watchdog walks the whole
            tree it brings for those, a node_modules moved into place included)."""
            if (self._pruned is not None and isinstance(event, PathedInotifyEvent) and event.ev.is_moved_to
                    and event.ev.is_directory and self._pruned(os.fsdecode(event.path))):
                src_path = self._decode_path(event.path)
                self.queue_event(DirMovedEvent("", src_path) if full_events else DirCreatedEvent(src_path))
                self.queue_event(DirModifiedEvent(os.path.dirname(src_path)))
                return
            super().build_and_queue_event(event, full_events=full_events)

        def on_thread_start(self) -> None:
            if self._pruned is None:
                super().on_thread_start()
                return
            self._inotify = _PrunedGroup(self._inotify_fd, os.fsencode(self.watch.path),
                                         is_recursive=self.watch.is_recursive,
                                         event_mask=self.get_event_mask_from_filter(),
                                         follow_symlink=self.watch.follow_symlink, pruned=self._pruned)

    class _PruningObserver(InotifyObserver):
        def __init__(self) -> None:
            super().__init__()
            self._pruners: dict[str, Pruned] = {}
            self._emitter_class = _PrunedEmitter
            self._emitter_kwargs = {**self._emitter_kwargs, "pruners": self._pruners}

        def schedule(self, event_handler, path, *, pruned: Pruned | None = None, **kwargs):
            if pruned is not None:
                self._pruners[str(path)] = pruned
            else:
                self._pruners.pop(str(path), None)
            return super().schedule(event_handler, path, **kwargs)


# ------------------------------------------------------------------ counting watches


# How to raise the inotify watch limit for good (said by the daemon and by `service install`).
RAISE_WATCH_LIMIT = ("echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/90-vaultmem.conf "
                     "&& sudo sysctl --system")


def inotify_watches() -> int | None:
    """The inotify watches this process holds (Linux: /proc/self/fdinfo); None where unknown."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    total, seen = 0, False
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
                total += sum(1 for line in f if line.startswith("inotify wd:"))
            seen = True
        except OSError:
            continue
    return total if seen else None


def root_identity(root) -> tuple[int, int] | None:
    """(device, inode) of a vault root that is a directory, else None."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def watch_limit() -> int | None:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def directories_under(roots: list[str], single: Iterable[str] = (), pruned: dict | None = None) -> int:
    """The watches recursive inotify watches of `roots`, and watches of the `single`
    directories alone, need: one per directory, each root included, symlinked directories not
    entered (as watchdog does), the directories `pruned[root]` excludes left out (as the
    vaults' watches do, watching.py). watchdog keeps one inotify instance per process, where a
    directory is watched once however many vaults hold it, so nested vaults count it once."""
    seen: set[str] = set()
    for root in roots:
        seen.update(walk_watched(os.path.realpath(root), (pruned or {}).get(root)))
    seen.update(os.path.realpath(d) for d in single)
    return len(seen)
