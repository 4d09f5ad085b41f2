"""The daemon: watches the vaults, applies every change through one writer thread, answers
requests on a Unix socket, runs scheduled upkeep, and talks to systemd.

Threads and what they own:
- the writer thread owns the writable VaultIndex (Tantivy writer, LanceDB table, catalog
  writes). Every change, reconcile and upkeep job goes through its queue; a burst becomes one
  batch. After each batch it refreshes the reader.
- connection threads answer requests with the read-only VaultIndex, one query at a time
  (the read lock), so searches never see a half-refreshed reader.
- watchdog's observer thread only turns file events into queue items; APScheduler's thread
  only enqueues upkeep. Nothing here writes a note.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import os
import queue
import signal
import socket
import socketserver
import stat
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from apscheduler.schedulers.background import BackgroundScheduler
from watchdog.events import (DirCreatedEvent, DirDeletedEvent, DirMovedEvent, FileClosedEvent, FileCreatedEvent,
                             FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileSystemEvent,
                             FileSystemEventHandler)

from . import __version__, inventory, ops, private
from .catalog import indexed_vaults
from .client import (DAEMON_RECORD, REBUILDING, STILL_INDEXING, Client, DaemonUnavailable, daemon_record,
                     socket_problem)
from .config import Settings, Vault, default_config_path
from .embedders import private_cache
from .errors import DiskFullError, IndexDamagedError, UsageError, VaultmemError, is_disk_full
from .index import SyncReport, VaultIndex, embedder_identity
from .query import check_unicode
from .links import LinkMap
from .scan import dir_excluded, is_note_path, is_under, matches, relpath_in
from .search import Searcher
from .usage import Usage
from .writing import replace_file
from .watching import PRUNES, make_observer, vault_pruner, vault_pruners, walk_watched

log = logging.getLogger("vaultmem.daemon")


# ------------------------------------------------------------------ systemd


def sd_notify(message: str) -> bool:
    """Send a state line to systemd's notify socket, if we run under Type=notify."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            s.sendall(message.encode())
        return True
    except OSError as err:
        log.warning("cannot notify systemd at %s: %s", addr, err)
        return False


# ------------------------------------------------------------------ memory


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library, looked up once: find_library runs `ldconfig -p` (2 ms), and bulk_heap asks
    for it twice in every write batch."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


# glibc serves a request of this size or more with its own mmap, given back to the system when
# freed. Left to itself it raises this threshold to the largest block freed so far (up to 32 MB),
# after which big buffers come from the heap and stay there. A LanceDB compaction after one edit,
# 20 times over the 10,000-note bench table: +57 MB of heap kept with the raising, +6 MB at a
# fixed 128 KB or 1 MB. Daemon (bench/daemon_bench.py, its own memory, same hour): after restart
# 164 against 173 MB, after 300 edits 197-199 against 234-244, after 1,000 edits 203 against 221.
MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 128 << 10  # glibc's default: free heap above the top this big goes back at once

# Reading and embedding notes allocates the embedder's batch arrays, a few MB each, again and
# again; at the fixed 1 MB threshold each was a fresh mmap whose pages fault in zeroed, and the
# daemon's first index took 20% longer than `vaultmem index` (in process, same vault: 2,000
# notes 15.7 against 13.2 s, 10,000 notes 77.1 against 65.9 s). While notes are read, blocks
# under 8 MB come from the heap and freed ones stay for the next batch; after, the thresholds
# are set back (bulk_heap) and the writer gives back the free heap (RELEASE_AFTER_CHUNKS).
BULK_MMAP_THRESHOLD = 8 << 20
BULK_TRIM_THRESHOLD = 64 << 20


def _mallopt(arena_max: int | None, mmap_threshold: int, trim_threshold: int) -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        if arena_max is not None:
            libc.mallopt(-8, arena_max)  # M_ARENA_MAX
        libc.mallopt(-3, mmap_threshold)  # M_MMAP_THRESHOLD (set: fixed, no raising)
        libc.mallopt(-1, trim_threshold)  # M_TRIM_THRESHOLD


def _tune_malloc() -> None:
    """glibc gives each thread its own malloc arena; with a thread per client that multiplies
    the heap. Two arenas are plenty here (same as MALLOC_ARENA_MAX=2). Big blocks are mmapped
    at a fixed threshold (MMAP_THRESHOLD)."""
    _mallopt(2, MMAP_THRESHOLD, TRIM_THRESHOLD)


@contextlib.contextmanager
def bulk_heap():
    """The writer's reading and embedding of notes, with the heap kept for big blocks (see
    BULK_MMAP_THRESHOLD); the daemon's own thresholds again after it."""
    _mallopt(None, BULK_MMAP_THRESHOLD, BULK_TRIM_THRESHOLD)
    try:
        yield
    finally:
        _mallopt(None, MMAP_THRESHOLD, TRIM_THRESHOLD)


def _return_free_memory() -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


# Big work (a first index, a folder of notes added) leaves freed heap resident that the daemon
# no longer needs. It is given back after this many chunks embedded, or a reconcile that
# changed over 100 notes: 295 -> 280 MB at the end of a first index of the 10,000-note bench
# vault, and 30-45 MB each 500 single-note edits. (The model's word table gives back its own
# pages after every embed call: UseEmbedder._release_pages.)
RELEASE_AFTER_CHUNKS = 500
RETRY_MAX_SECONDS = 300.0  # the longest wait before a reconcile after failed write batches
PROGRESS_SECONDS = 10.0  # how often a long reconcile says how far it is


def _rss_mb() -> float:
    """This process's resident set in MB (0 where /proc is not there)."""
    try:
        with open("/proc/self/status") as f:
            return next((int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmRSS:")), 0.0)
    except OSError:
        return 0.0


def _iso(ts: float | None) -> str | None:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds") if ts else None


# ------------------------------------------------------------------ the writer's work items


@dataclass
class Work:
    kind: str  # "path" | "reconcile" | "links" | "optimize" | "call" | "stop"
    vault: str = ""
    rel: str = ""
    reason: str = ""
    fn: Callable[[VaultIndex], Any] | None = None
    done: threading.Event | None = None
    result: dict[str, Any] = field(default_factory=dict)


class _OverflowWatch(logging.Handler):
    """watchdog reports a lost-events inotify overflow only as a log warning: turn it into a
    reconcile."""

    def __init__(self, daemon: "Daemon"):
        super().__init__(logging.WARNING)
        self.daemon = daemon

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.daemon.enqueue(Work("reconcile", reason="inotify queue overflowed"))


WATCH_RECOUNT_SECONDS = 0.5
# Directories outside the vaults watched for notes that are symlinks (links.py): a watch each,
# and watchdog runs a thread for each. Links past this many are found by the periodic reconcile,
# and the log and status say so. A dotfiles setup links into one or two directories.
MAX_LINK_WATCHES = 32
# Each vault root is looked at this often: gone, moved aside, or replaced by another directory
# (a fresh clone in its place). watchdog reports none of these when the root itself moves (its
# watch follows the moved directory), so a stat of each root is the one sure way.
ROOT_CHECK_SECONDS = 2.0
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


def _concerns(vault: Vault, rel: str, is_directory: bool, include: tuple[str, ...], exclude: tuple[str, ...],
              imported: frozenset[str] = frozenset()) -> bool:
    """Whether an event at vault path `rel` is the writer's to look at: a directory not
    excluded (its notes), a note path, or a file a CLAUDE.md imports."""
    if is_directory:
        return not dir_excluded(vault, rel, exclude)
    return is_note_path(vault, rel, include, exclude) or rel in imported


class _Events(FileSystemEventHandler):
    def __init__(self, daemon: "Daemon", vault: Vault):
        self.daemon, self.vault = daemon, vault
        cfg = daemon.settings.index
        self.include, self.exclude = cfg.include, cfg.exclude

    def on_any_event(self, event: FileSystemEvent) -> None:
        for path in _event_paths(event):
            self.daemon.linked_event(path, event.is_directory)  # a target of a note that is a link
            rel = relpath_in(self.vault, path)
            if not rel or rel == "." or not self.vault.owns(rel):
                continue  # the root itself (Daemon._check_roots looks after it), or a nested vault's
            imported = self.daemon.imported.get(self.vault.name, frozenset())
            if _concerns(self.vault, rel, event.is_directory, self.include, self.exclude, imported):
                self.daemon.enqueue(Work("path", vault=self.vault.name, rel=rel))
            elif not event.is_directory and (self.daemon.links.is_linked_dir(self.vault.name, rel) or (
                    isinstance(event, (FileCreatedEvent, FileMovedEvent))
                    and not matches(self.vault.globbed(rel), self.exclude)
                    and os.path.islink(path) and os.path.isdir(path))):
                # a symlink to a folder of notes, made or removed: the event says a file
                self.daemon.enqueue(Work("path", vault=self.vault.name, rel=rel))


class _LinkEvents(FileSystemEventHandler):
    """Events in a directory outside the vaults where notes that are symlinks really live."""

    def __init__(self, daemon: "Daemon"):
        self.daemon = daemon

    def on_any_event(self, event: FileSystemEvent) -> None:
        for path in _event_paths(event):
            self.daemon.linked_event(path, event.is_directory)


# ------------------------------------------------------------------ the socket server


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 512  # listen backlog: bursts of connections wait instead of failing

    def __init__(self, path: str, owner: "Daemon"):
        self.owner = owner
        self.slots = threading.BoundedSemaphore(owner.settings.daemon.max_clients)
        super().__init__(path, _Connection)

    def verify_request(self, request: socket.socket, client_address: Any) -> bool:
        try:
            uid = private.peer_uid(request)
        except OSError:
            return False
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %d", uid)
            return False
        return True


class _Connection(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        owner: Daemon = self.server.owner  # type: ignore[attr-defined]
        cfg = owner.settings.daemon
        sock: socket.socket = self.request
        sock.settimeout(cfg.client_idle_seconds)
        slots = self.server.slots  # type: ignore[attr-defined]
        if not slots.acquire(timeout=cfg.client_idle_seconds):
            self._send(sock, {"ok": False, "code": "busy", "error": "too many clients; try again"})
            return
        try:
            buf = b""
            while True:
                try:
                    data = sock.recv(65536)
                except (socket.timeout, OSError):
                    return  # stalled or gone
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if len(line) > cfg.max_request_bytes:
                        buf = line  # answered below, like a line still arriving
                        break
                    if line.strip() and not self._send(sock, owner.handle_line(line)):
                        return
                if len(buf) > cfg.max_request_bytes:
                    self._send(sock, {"ok": False, "code": "too_large",
                                      "error": f"request over {cfg.max_request_bytes} bytes"})
                    self._discard(sock)
                    return
        finally:
            slots.release()

    @staticmethod
    def _discard(sock: socket.socket) -> None:
        """Close our side, then drop what the client still sends (briefly, boundedly), so the
        kernel does not reset the connection before the client reads our answer."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(1.0)
            for _ in range(256):
                if not sock.recv(65536):
                    break
        except OSError:
            pass

    @staticmethod
    def _send(sock: socket.socket, obj: dict) -> bool:
        try:
            sock.sendall(json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
            return True
        except OSError:
            return False


# ------------------------------------------------------------------ the daemon


class _Context(ops.Context):
    """How the shared operations reach the daemon's index: reads under the read lock with the
    reader, writes on the writer thread (the reader is refreshed before the answer)."""

    def __init__(self, daemon: "Daemon"):
        self.daemon = daemon
        self.settings = daemon.settings
        self.usage = daemon.usage

    def read(self, fn):
        d = self.daemon
        with d.read_lock:
            return fn(d.reader, d.searcher)

    def incomplete(self) -> str | None:
        d = self.daemon
        if d.rebuilding:
            return REBUILDING
        return STILL_INDEXING if not d.ready else None

    def write(self, fn):
        work = self.daemon.enqueue(Work("call", fn=fn, done=threading.Event()))
        work.done.wait()
        if "exception" in work.result:
            raise work.result["exception"]
        if "value" not in work.result:
            raise VaultmemError("the write failed; see the daemon's log")
        return work.result["value"]


# Daemon.run's answer when SIGHUP asked for a reload and the config now reads well: the caller
# runs the daemon again from the start (cli.cmd_daemon: exec, same pid, as systemd expects).
RELOAD = -1


def _stamp(path) -> tuple[int, int, int] | None:
    """What tells a file changed (mtime, size, inode: an editor's atomic save is a new inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class Daemon:
    def __init__(self, settings: Settings, socket_path: str,
                 reload_settings: Callable[[], Settings] | None = None):
        """`reload_settings`: resolves the settings again (same flags, the config file and
        environment as they are now), for SIGHUP; None: SIGHUP only stops."""
        self.settings = settings
        self.socket_path = socket_path
        self.reload_settings = reload_settings
        self._config_path = settings.config_file or default_config_path()
        self._config_stamp = _stamp(self._config_path)
        self._hup = False
        self.queue: queue.Queue[Work] = queue.Queue()
        self.stop_event = threading.Event()
        self.read_lock = threading.Lock()
        self.generation = 0
        self.ready = False
        self.rebuilding = False  # `index --rebuild` runs: answers miss the notes not read again yet
        self.started = time.time()
        self.last_reconcile: dict[str, Any] | None = None
        self.commits_since_optimize = 0
        self.in_flight = 0
        self.embedded_since_release = 0
        # how far the running reconcile has read (status, the log, systemd's status line): a first
        # index of 10,000 notes takes a minute or more
        self.progress: dict[str, int] | None = None
        self._progress_said = 0.0
        self._progress_told = False  # systemd's status line says a reconcile's progress
        # the last failed write batch while they keep failing (status); its count of failures in a
        # row sets the wait before the retry: 0, 1, 2, 4 ... RETRY_MAX_SECONDS s
        self.write_failure: dict[str, Any] | None = None
        self._retry: threading.Timer | None = None
        self.writer: VaultIndex | None = None
        self.reader: VaultIndex | None = None
        self.usage: Usage | None = None
        self.ctx: _Context | None = None
        self.searcher: Searcher | None = None
        self.server: _Server | None = None
        self.observer: Any = None  # watching.make_observer()
        self.scheduler: BackgroundScheduler | None = None
        self._writer_thread: threading.Thread | None = None
        self._overflow = _OverflowWatch(self)
        self.watch: dict[str, Any] | None = None  # watches held against directories (status)
        self._watched_roots: dict[str, tuple[int, int]] = {}  # vault -> the root directory watched
        self._watch_lock = threading.RLock()
        self.links = LinkMap()  # notes that are symlinks, or in a symlinked folder: where they live
        self._link_watches: dict[tuple[str, bool], Any] = {}  # (real directory, recursive) -> watch
        self._links_unwatched = 0  # directories past MAX_LINK_WATCHES
        self._writer_resets = 0  # the writer's count of engines made anew, as the reader last opened them
        self.imported: dict[str, frozenset[str]] = {}  # vault -> the files its CLAUDE.md files import

    # -------------------------------------------------------------- life cycle

    def run(self) -> int:
        """Start everything, serve until SIGTERM/SIGINT, shut down cleanly; 0. On SIGHUP (`systemctl
        --user reload vaultmem`), read the config again: when it reads well, shut down the same
        way and return RELOAD; when not, say why and keep serving as before."""
        signal.signal(signal.SIGTERM, lambda *_: self.stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: self.stop_event.set())
        signal.signal(signal.SIGHUP, lambda *_: setattr(self, "_hup", True))
        reloading = False
        self.start()
        try:
            while not self.stop_event.wait(0.5):
                if self._hup:
                    self._hup = False
                    if reloading := self._new_config_reads_well():
                        break
        finally:
            self.shutdown(reloading)
        return RELOAD if reloading else 0

    def _new_config_reads_well(self) -> bool:
        if self.reload_settings is None:
            log.warning("SIGHUP: this daemon cannot reload; restart it")
            return False
        try:
            settings = self.reload_settings()
        except VaultmemError as err:
            log.error("SIGHUP: the config is not reloaded, this daemon goes on as it was: %s", err)
            return False
        if not settings.vaults and not indexed_vaults(settings.state_dir):  # not the writer's connection: it is busy
            log.error("SIGHUP: the config is not reloaded, this daemon goes on as it was: it names no vault")
            return False
        if self.writer is not None and settings.state_dir == self.settings.state_dir:
            try:
                self.writer.check_embedder(settings)
            except VaultmemError as err:
                log.error("SIGHUP: the config is not reloaded, this daemon goes on as it was: %s", err)
                return False
        log.info("SIGHUP: reloading: the daemon starts again with the config as it is now")
        return True

    def config_changed(self) -> bool:
        """The config file was edited (made, removed) since this daemon read it."""
        return _stamp(self._config_path) != self._config_stamp

    def start(self) -> None:
        if problem := socket_problem(self.socket_path):  # said before minutes of indexing, not after
            raise UsageError(problem)
        _tune_malloc()
        # a long-lived process: the model's word table is served from a file map (embedders.py)
        self.writer = self._open_writer()
        if self.writer is None:  # stopped while it waited for room
            return
        try:
            self.writer.check_embedder()  # exit 4, said once: a write would fail again and again
        except VaultmemError:
            self.writer.close()
            raise
        vaults = self.writer.served()
        if not vaults:
            self.writer.close()
            raise VaultmemError("no vault to watch: pass --vault DIR (or set vaults in the config file)")
        for v in vaults:
            self.writer.catalog.put_vault(v)
        self.vaults = {v.name: v for v in vaults}
        every = self.writer.imported_all()
        self.imported = {v.name: frozenset(every.get(v.name, ())) for v in vaults}  # as last indexed
        for v in self.writer.vaults():
            if v.name not in self.vaults:
                log.warning("vault %s (%s) is in the index but not in the config: its notes are answered as last "
                            "indexed and not updated; `vaultmem reindex --drop-vault %s` takes them out",
                            v.name, v.root, v.name)
        self.reader = VaultIndex(self.settings, writable=False, share_vectors_of=self.writer, model_cache=private_cache())
        self._writer_resets = self.writer.resets
        self.usage = Usage(self.settings.state_dir)
        self.searcher = Searcher(self.reader, self.usage)
        self.ctx = _Context(self)
        self._bind()
        self._writer_thread = threading.Thread(target=self._writer_loop, name="vaultmem-writer", daemon=True)
        self._writer_thread.start()
        self._serve_thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                              name="vaultmem-socket", daemon=True)
        self._serve_thread.start()
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).addHandler(self._overflow)
        # watchdog 7.1 warns when it adds a watch it already holds: a new directory tree is walked
        # on its creation event and its subdirectories' own events add them again. The callback
        # is replaced by itself, so nothing is wrong, but the message prints a bound method's repr
        # holding the whole watch table: one `pip install` in a vault wrote 41 MB of log.
        warnings.filterwarnings("ignore", message="Callback with id .* already exists for watch",
                                category=RuntimeWarning)
        self.observer = make_observer()
        self._schedule_watches()
        self.observer.start()
        # the start-up reconcile runs on the writer thread, after the watch is up, so no edit
        # falls between the scan and the watch
        work = self.enqueue(Work("reconcile", reason="start-up", done=threading.Event()))
        while not work.done.wait(0.5):
            if self.stop_event.is_set():
                return
        self.ready = True
        self.scheduler = BackgroundScheduler(daemon=True)
        cfg = self.settings.daemon
        if cfg.reconcile_minutes > 0:
            self.scheduler.add_job(lambda: self.enqueue(Work("reconcile", reason="scheduled")),
                                   "interval", minutes=cfg.reconcile_minutes, id="reconcile")
        if cfg.optimize_minutes > 0:
            self.scheduler.add_job(lambda: self.enqueue(Work("optimize")), "interval",
                                   minutes=cfg.optimize_minutes, id="optimize")
        inv = self.settings.inventory
        if inv.every_days > 0 and inv.check_minutes > 0:
            self.scheduler.add_job(self._inventory_if_due, "interval", minutes=inv.check_minutes, id="inventory")
        self.scheduler.add_job(self._check_watches, "interval", minutes=max(1.0, cfg.reconcile_minutes or 15.0),
                               id="watch-check")
        self.scheduler.add_job(self._check_roots, "interval", seconds=ROOT_CHECK_SECONDS, id="root-check")
        self.scheduler.start()
        summary = work.result.get("summary") or "the start-up reconcile failed; it is retried"
        sd_notify(f"READY=1\nSTATUS=watching {len(vaults)} vault(s), {summary}")
        log.info("ready: %s; serving %s", summary, self.socket_path)
        self._check_watches(rewatch=False)  # after readiness: it walks every directory of the vaults
        threading.Thread(target=self._warm_up, name="vaultmem-warm-up", daemon=True).start()

    def _open_writer(self) -> VaultIndex | None:
        """The writable index; on a full disk, wait for room (systemd is told why, and that the
        start takes longer), checking after 5, 10, 20 ... 60 s: exiting instead, the daemon was
        either never restarted (exit 2) or restarted every 2 s to fail again. None when stopped
        meanwhile."""
        delay = 5.0
        while True:
            try:
                return VaultIndex(self.settings, writable=True, model_cache=private_cache())
            except DiskFullError as err:
                log.error("%s; the daemon waits for room and tries again in %.0f s (queries without it answer "
                          "from the index as it is)", err, delay)
                sd_notify(f"STATUS=waiting for disk space: {err}\nEXTEND_TIMEOUT_USEC={int((delay + 30) * 1e6)}")
            if self.stop_event.wait(delay):
                return None
            delay = min(60.0, delay * 2)

    def _schedule_watches(self) -> None:
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
        self._watch_links()

    def linked_event(self, path: str, is_directory: bool) -> None:
        """An event at a real path where notes that are symlinks live (links.py): look at those
        notes again."""
        cfg = self.settings.index
        for name, rel in self.links.notes_at(path):
            v = self.vaults.get(name)
            if v is not None and v.owns(rel) and _concerns(v, rel, is_directory, cfg.include, cfg.exclude,
                                                           self.imported.get(name, frozenset())):
                self.enqueue(Work("path", vault=name, rel=rel))

    def _watch_links(self) -> None:
        """Watch the directories outside the vaults where notes that are symlinks really live
        (a vault's own watch covers those inside it), and stop watching those no note links to
        any more. A directory watched anew has its notes looked at once: an edit may have
        landed between the scan that found the link and this watch."""
        assert self.observer is not None
        with self._watch_lock:
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
                    self.enqueue(Work("path", vault=name, rel=rel))
            if unwatched and unwatched != self._links_unwatched:
                log.warning("symlinked notes live in %d directories outside the vaults; %d are watched, edits in the "
                            "other %d are found by the periodic reconcile", len(wanted), len(keep), unwatched)
            self._links_unwatched = unwatched
            if self.watch is not None:
                self.watch.update(self._link_watch_status())

    def _linked_dir_excluded(self, path: str) -> bool:
        """Whether a directory below a symlinked folder of notes (`memory -> ~/notes`, a git
        checkout) is excluded at every place it appears in the vaults: its watch prunes it, as
        a vault's own watch prunes the vault's excluded directories."""
        places, exclude = self.links.notes_at(path), self.settings.index.exclude
        return bool(places) and all(name in self.vaults and dir_excluded(self.vaults[name], rel, exclude)
                                    for name, rel in places)

    def _link_watch_status(self) -> dict[str, int]:
        return {"outside": len(self._link_watches), "outside_unwatched": self._links_unwatched}

    def _check_roots(self) -> None:
        """A vault root gone, moved aside, back, or replaced: check the watches now."""
        if any(root_identity(v.root) != self._watched_roots.get(n) for n, v in self.vaults.items()):
            self._check_watches()

    def _check_watches(self, rewatch: bool = True) -> None:
        """Is every directory of the vaults watched? watchdog skips, without a word, each
        subdirectory it cannot watch, also when the kernel's inotify watch limit
        (fs.inotify.max_user_watches, shared by all of this user's programs) is reached; and a
        vault root that is deleted or moved is not watched again when a directory is back in
        its place. Edits there would wait for the next periodic reconcile. Count the watches
        held against the directories the vaults have; when short, say so (log, status), and
        every [daemon] unwatched_seconds check again and reconcile. A check that finds the watch
        short or a root changed (`rewatch`) watches the vaults afresh and reconciles: that
        takes once the limit is raised or the root is back. Missing roots show in status."""
        with self._watch_lock:  # the scheduler may run two checks at once
            self._check_watches_locked(rewatch)

    def _check_watches_locked(self, rewatch: bool) -> None:
        assert self.observer is not None and self.scheduler is not None
        if inotify_watches() is None:  # not Linux: nothing to count
            return
        now = {n: root_identity(v.root) for n, v in self.vaults.items()}
        need, held = self._count_watches([v for n, v in self.vaults.items() if now[n] is not None],
                                         list(self._link_watches))
        # a root gone, back, or replaced: its watch died, is missing, or follows the old directory
        differs = {n for n in self.vaults if now[n] != self._watched_roots.get(n)}
        if rewatch and (held < need or differs):
            self.observer.unschedule_all()
            self._schedule_watches()
            held = inotify_watches() or 0
            self.enqueue(Work("reconcile", reason="watched afresh"))  # what changed while unwatched
            back = sorted(n for n in differs if now[n] is not None)
            if back:
                log.info("vault %s is back: watching it again", ", ".join(back))
        missing = sorted(n for n in self.vaults if now[n] is None)
        was_short = self.watch is not None and self.watch["watched"] < self.watch["directories"]
        self.watch = {"watched": held, "directories": need, "complete": held >= need and not missing,
                      "limit": watch_limit(), "missing": missing, **self._link_watch_status()}
        if held < need and not was_short:  # said once, when it begins
            log.warning("only %d of the vaults' %d directories are watched: the inotify watch limit "
                        "(fs.inotify.max_user_watches = %s) is reached; edits elsewhere are picked up by "
                        "a reconcile every %.0f s. Raise it: %s",
                        held, need, self.watch["limit"], self.settings.daemon.unwatched_seconds, RAISE_WATCH_LIMIT)
            self.scheduler.add_job(self._unwatched_tick, "interval", seconds=self.settings.daemon.unwatched_seconds,
                                   id="unwatched-reconcile", replace_existing=True)
        elif held >= need and was_short:
            log.info("all %d directories of the vaults are watched again", need)
            self.scheduler.remove_job("unwatched-reconcile")

    def _count_watches(self, roots: list[Vault], links: list[tuple[str, bool]] = ()) -> tuple[int, int]:
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
        self._check_watches()  # watched afresh, and reconciled, once the limit is raised
        if self.watch and self.watch["watched"] < self.watch["directories"]:  # still at the watch limit
            self.enqueue(Work("reconcile", reason="vault not wholly watched"))

    def _warm_up(self) -> None:
        """Load what the first query needs (LanceDB and its in-memory copy, the embedding model)
        after readiness, not before: a restart on an unchanged vault needs neither."""
        t = time.perf_counter()
        try:
            assert self.reader is not None
            # no read lock: loading takes seconds and must not hold up status or queries
            self.reader.vectors.search(self.reader.embedder.embed_query(["warm up"])[0], 1)
        except Exception:  # warming is an optimisation; the first query will load what it needs
            log.exception("warm-up failed")
            return
        _return_free_memory()  # loading the model leaves tens of MB of freed heap behind
        log.info("warmed up in %.1f s", time.perf_counter() - t)

    def _inventory_if_due(self) -> None:
        """The scheduled stock-take: save a report when the last one is `every_days` old."""
        last = inventory.last_saved(self.settings.state_dir)
        if last is not None and time.time() - last < self.settings.inventory.every_days * 86400:
            return
        try:
            report = self.ctx.read(lambda idx, _: inventory.take(idx, self.usage, self.settings))
            path = inventory.save(report, self.settings.state_dir)
        except Exception:
            log.exception("the scheduled inventory failed")
            return
        c = report["counts"]
        log.info("inventory saved to %s: %s", path, "clean" if report["clean"] else
                 ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in c.items() if n))

    def _bind(self) -> None:
        """Listen on the socket: in a directory made 0700 when vaultmem makes it; one that is
        there already must be this user's real directory that no one else can write, and its
        mode is left as it is (a team directory, the home directory). Then say in the state dir
        where this daemon listens (daemon.json), for clients whose shell would look elsewhere."""
        directory = Path(os.path.dirname(os.path.abspath(self.socket_path)))
        private.make_dirs(directory)
        if problem := private.dir_problem(directory, "the socket's directory"):
            raise private.NotPrivateError(f"{problem}: choose a socket in a directory of your own (--socket)")
        if os.path.lexists(self.socket_path):
            st = os.lstat(self.socket_path)
            if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
                raise private.NotPrivateError(f"{self.socket_path} is there and is not a socket of yours; "
                                              "move it away or choose another --socket")
            try:
                Client(self.socket_path, timeout=2).close()
            except DaemonUnavailable:
                os.unlink(self.socket_path)  # left behind by a daemon that died
            else:
                raise VaultmemError(f"a daemon already answers on {self.socket_path}")
        old = os.umask(0o177)
        try:
            self.server = _Server(self.socket_path, self)
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)
        record = {"pid": os.getpid(), "socket": os.path.abspath(self.socket_path), "started": _iso(self.started)}
        replace_file(self.settings.state_dir / DAEMON_RECORD, json.dumps(record) + "\n")

    def _forget_record(self) -> None:
        """Take daemon.json away at shutdown, unless another daemon has written it since."""
        path = self.settings.state_dir / DAEMON_RECORD
        if (daemon_record(self.settings.state_dir) or {}).get("pid") == os.getpid():
            path.unlink(missing_ok=True)

    def shutdown(self, reloading: bool = False) -> None:
        log.info("stopping")
        if reloading:  # the same pid sends READY=1 again once it has started over
            sd_notify(f"RELOADING=1\nMONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
        else:
            sd_notify("STOPPING=1")
        if self.observer is not None:
            self.observer.stop()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        if self._retry is not None:
            self._retry.cancel()
        if self._writer_thread is not None:
            self.queue.put(Work("stop"))
            self._writer_thread.join(timeout=120)  # finishes the batch in hand, commits
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            try:
                os.unlink(self.socket_path)
            except OSError:
                pass
            self._forget_record()
        if self.observer is not None:
            self.observer.join(timeout=5)
        for name in ("watchdog.observers.inotify", "watchdog.observers.inotify_c"):
            logging.getLogger(name).removeHandler(self._overflow)
        if self.reader is not None:
            self.reader.close()
        if self.writer is not None:
            self.writer.close()
        if self.usage is not None:
            self.usage.close()
        log.info("stopped")

    # -------------------------------------------------------------- the writer

    def enqueue(self, work: Work) -> Work:
        self.queue.put(work)
        return work

    def _drain(self, batch: list[Work]) -> None:
        while True:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                return

    def _writer_loop(self) -> None:
        debounce = self.settings.daemon.debounce_ms / 1000.0
        while True:
            batch = [self.queue.get()]
            self._drain(batch)
            if debounce and any(w.kind == "path" for w in batch):
                time.sleep(debounce)  # the rest of an editor's save (temp file, rename) arrives
                self._drain(batch)
            stop = any(w.kind == "stop" for w in batch)
            self.in_flight = len(batch)  # counted as pending until searchable
            try:
                self._apply(batch)
                self.write_failure = None
            except Exception as err:  # one bad batch must not kill the writer; a reconcile repairs
                failures = (self.write_failure or {}).get("failures", 0) + 1
                # the first retry at once (a one-off), then after 1, 2, 4 ... s
                delay = 0.0 if failures == 1 else min(RETRY_MAX_SECONDS, 2.0 ** (failures - 2))
                self.write_failure = {"at": _iso(time.time()), "error": str(err) or type(err).__name__,
                                      "failures": failures, "retry_in_s": delay}
                if is_disk_full(err):  # said in one line: a traceback a second would fill the disk more
                    log.error("%s; the daemon tries again in %.0f s", err, delay)
                else:
                    log.exception("a write batch failed; a reconcile will follow in %.0f s", delay)
                if not stop:
                    self._retry_after(delay)
            self.in_flight = 0
            for w in batch:
                if w.done is not None:
                    w.done.set()
            if stop:
                return

    def _progress(self, done: int, total: int, embedded: int) -> None:
        """The reconcile read `done` of the `total` files it has to read: kept for status, and,
        once it has run PROGRESS_SECONDS, said in the log and to systemd (`systemctl --user
        status vaultmem`) every PROGRESS_SECONDS."""
        self.progress = {"files_read": done, "files_to_read": total, "chunks_embedded": embedded}
        now = time.monotonic()
        if done < total and now - self._progress_said >= PROGRESS_SECONDS:
            self._progress_said = now
            line = f"reading notes: {done:,} of {total:,} files, {embedded:,} chunks embedded"
            log.info("%s", line)
            self._progress_told = sd_notify(f"STATUS={line}") or self._progress_told

    def _retry_after(self, delay: float) -> None:
        """A reconcile after `delay` seconds, unless one is already waiting. Enqueued at once, a
        failure that lasts (a full disk) made the writer retry in a loop: 75,000 failed batches
        and 55 MB of log in 25 seconds."""
        if self._retry is not None and self._retry.is_alive():
            return
        self._retry = threading.Timer(delay, lambda: self.enqueue(Work("reconcile", reason="after a failed batch")))
        self._retry.daemon = True
        self._retry.start()

    def _apply(self, batch: list[Work]) -> None:
        assert self.writer is not None
        t0 = time.perf_counter()
        report = SyncReport()
        reconcile = [w for w in batch if w.kind == "reconcile"]
        if reconcile:
            self._progress_said = time.monotonic()  # a reconcile shorter than PROGRESS_SECONDS says nothing
            try:
                with bulk_heap():
                    report = self.writer.sync(list(self.vaults.values()), progress=self._progress)
            finally:
                self.progress = None
            if self._progress_told and self.ready:  # at start-up, READY=1 says what is done
                self._progress_told = not sd_notify(f"STATUS=watching {len(self.vaults)} vault(s), {report.summary()}")
            self.last_reconcile = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                   "reason": reconcile[0].reason, "summary": report.summary()}
            for w in reconcile:
                w.result.update(report.__dict__, summary=report.summary())
            log.info("reconcile (%s): %s", reconcile[0].reason, report.summary())
            # the notes that are symlinks, looked up again in the next batch: not in this one,
            # whose end the start-up waits for (10,000 notes: ~20 ms)
            self.enqueue(Work("links"))
        else:
            paths: dict[str, set[str]] = {}
            for w in batch:
                if w.kind == "path":
                    paths.setdefault(w.vault, set()).add(w.rel)
            for name, rels in paths.items():
                v = self.vaults[name]
                with bulk_heap():
                    r = self.writer.update(v, rels)
                moved = self.links.update(v, rels | {key.split(":", 1)[1] for rel in rels if os.path.isdir(v.root / rel)
                                                     for key in self.writer.catalog.files(name, under=rel)})
                for _, rel in moved:  # read before the map knew them: an edit since found no note
                    self.enqueue(Work("path", vault=name, rel=rel))
                for k in ("added", "updated", "removed", "skipped", "chunks_embedded", "chunks_reused", "marked"):
                    setattr(report, k, getattr(report, k) + getattr(r, k))
                report.problems.update(r.problems)
                report.moved.update(r.moved)
            if paths:
                self._watch_links()
            if report.changes:
                log.info("applied %d changed path(s) in %.0f ms: %d added, %d updated, %d removed, %d skipped; "
                         "%d chunks embedded", sum(len(r) for r in paths.values()), (time.perf_counter() - t0) * 1000,
                         report.added, report.updated, report.removed, report.skipped, report.chunks_embedded)
                if report.marked:
                    log.info("superseded_by line updated in %d note(s) (mark_superseded)", report.marked)
                for key, reason in report.problems.items():
                    log.warning("skipped %s: %s", key, reason)
        self.embedded_since_release += report.chunks_embedded
        if self.embedded_since_release >= RELEASE_AFTER_CHUNKS or (reconcile and report.changes > 100):
            self.embedded_since_release = 0
            before = _rss_mb()
            _return_free_memory()
            log.info("gave back memory after the work: RSS %.0f -> %.0f MB", before, _rss_mb())
        if report.moved and self.usage is not None:
            carried = self.usage.follow(report.moved)
            log.info("%d note(s) moved; usage records of %d carried to the new paths", len(report.moved), carried)
        for w in batch:
            if w.kind == "call" and w.fn is not None:
                try:
                    w.result["value"] = w.fn(self.writer)
                except Exception as err:  # handed back to the requester, whose answer says it
                    if not isinstance(err, VaultmemError):
                        log.exception("a write request failed")
                    w.result["exception"] = err
        if report.changes or any(w.kind == "call" for w in batch):
            self.commits_since_optimize += 1
            self._refresh()
            self._follow_imports()
        if any(w.kind == "links" for w in batch):
            for v in self.vaults.values():
                self.links.reset(v, self.writer.catalog.paths(v.name))
            self._watch_links()
            # their targets may have changed since the reconcile read them, when nothing watched
            # where they are: each is looked at once more (a stat when unchanged)
            for name, rel in self.links.paths():
                self.enqueue(Work("path", vault=name, rel=rel))
        wants_optimize = any(w.kind == "optimize" for w in batch)
        if reconcile and report.changes >= self.settings.index.batch_files:
            # a bulk load (the first index, an upgrade that re-reads every note) leaves the
            # vector table in hundreds of fragments: at 10,000 notes the daemon stayed ~45 MB
            # bigger until the hourly compaction. Compact next, once the reconcile has answered.
            self.enqueue(Work("optimize"))
        if wants_optimize or self.commits_since_optimize >= self.settings.daemon.optimize_after_commits:
            t = time.perf_counter()
            self.writer.optimize()
            self.commits_since_optimize = 0
            self._refresh()
            log.info("optimized the indexes in %.0f ms", (time.perf_counter() - t) * 1000)
        log.debug("batch of %d item(s) in %.1f ms", len(batch), (time.perf_counter() - t0) * 1000)

    def _follow_imports(self) -> None:
        """Keep the files the CLAUDE.md files import (index.imported) watched as notes. A file
        imported from now on is looked at once more: an edit made while the writer read the
        CLAUDE.md that imports it was not yet its to see."""
        assert self.writer is not None
        every = self.writer.imported_all()
        for name in self.vaults:
            now = frozenset(every.get(name, ()))
            for rel in sorted(now - self.imported.get(name, frozenset())):
                self.enqueue(Work("path", vault=name, rel=rel))
            self.imported[name] = now

    def _refresh(self) -> None:
        with self.read_lock:
            assert self.reader is not None and self.writer is not None
            if self.writer.resets != self._writer_resets:  # an engine was made anew: the files it read are gone
                self._writer_resets = self.writer.resets
                self.reader.close()
                self.reader = VaultIndex(self.settings, writable=False, share_vectors_of=self.writer)
                self.searcher = Searcher(self.reader, self.usage)
            else:
                self.reader.refresh()
            self.generation += 1

    # -------------------------------------------------------------- requests

    def handle_line(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
        except (UnicodeDecodeError, ValueError) as err:
            return {"ok": False, "code": "bad_json", "error": f"malformed JSON: {err}"}
        if not isinstance(req, dict):
            return {"ok": False, "code": "bad_request", "error": "a request is a JSON object with an 'op'"}
        op = req.get("op")
        handler = self._handler(op) if isinstance(op, str) else None
        if handler is None:
            return {"ok": False, "code": "unknown_op", "error": f"unknown op {op!r}; ops: {', '.join(self.ops())}"}
        want = req.get("state_dir")
        if want and os.path.realpath(os.path.expanduser(str(want))) != str(self.settings.state_dir):
            return {"ok": False, "code": "wrong_state_dir",
                    "error": f"this daemon serves {self.settings.state_dir}, not {want}"}
        starting = not self.ready  # read before the answer is: the reconcile may end meanwhile
        try:
            check_unicode(req)
            out = handler(req)
        except VaultmemError as err:
            if isinstance(err, IndexDamagedError):  # the next reconcile's check finds it and makes it again
                self.enqueue(Work("reconcile", reason="a query found the index unreadable"))
            return {"ok": False, "code": type(err).__name__, "error": str(err)}
        except Exception as err:  # a request must never take the daemon down
            log.exception("request %r failed", op)
            return {"ok": False, "code": "internal", "error": f"{type(err).__name__}: {err}"}
        if op == "query" and starting and out.get("ok"):
            out["indexing"] = True  # the start-up reconcile is still reading: notes may be missing
            out["incomplete"] = STILL_INDEXING
        if "id" in req:
            out["id"] = req["id"]
        return out

    def ops(self) -> list[str]:
        return sorted({n[3:] for n in dir(self) if n.startswith("op_")} | set(ops.OPS))

    def _handler(self, op: str) -> Callable[[dict], dict] | None:
        """The daemon's own ops (op_*), else the shared operations of ops.py (their requests
        are documented there), run through this daemon's context."""
        own = getattr(self, f"op_{op}", None)
        if own is not None:
            return own
        if op in ops.OPS:
            return lambda req: ops.OPS[op](self.ctx, req)
        return None

    def op_ping(self, req: dict) -> dict:
        return {"ok": True, "version": __version__, "state_dir": str(self.settings.state_dir)}

    def op_status(self, req: dict) -> dict:
        assert self.reader is not None
        with self.read_lock:
            counts = self.reader.catalog.counts()
            skipped = [{"key": r["key"], "reason": r["reason"]} for r in self.reader.catalog.skipped()]
            pending_marks = len(self.reader.catalog.pending())
            vaults = self.reader.vault_status(list(self.vaults.values()))
            ident, dim = self.reader.indexed_embedder() or embedder_identity(self.settings)
        return {
            "ok": True, "version": __version__, "pid": os.getpid(), "ready": self.ready, "progress": self.progress,
            "rebuilding": self.rebuilding, "incomplete": self.ctx.incomplete() if self.ctx else None,
            "generation": self.generation, **counts,
            "pending": self.queue.qsize() + self.in_flight + pending_marks,
            "vaults": vaults,
            "embedder": ident, "dim": dim, "state_dir": str(self.settings.state_dir),
            "socket": self.socket_path, "last_reconcile": self.last_reconcile, "watch": self.watch,
            "write_failure": self.write_failure,
            "last_inventory": _iso(inventory.last_saved(self.settings.state_dir)),
            "uptime_s": round(time.time() - self.started, 1), "skipped_files": skipped,
            "config_file": str(self._config_path), "config_changed": self.config_changed(),
        }

    def op_reindex(self, req: dict) -> dict:
        """A full reconcile now (with "rebuild": true, from scratch; with "drop": [names], those
        vaults' notes taken out of the index, which the daemon must not watch); answers when done."""
        drop = req.get("drop")
        if drop:
            if not isinstance(drop, list) or not all(isinstance(n, str) for n in drop):
                return {"ok": False, "code": "UsageError", "error": "drop must be a list of vault names"}
            watched = sorted(set(drop) & set(self.vaults))
            if watched:
                how = ("take it out of the config, reload the daemon (`systemctl --user reload vaultmem`; one "
                       "started with --vault flags: restart it without), then drop it"
                       if self.settings.vaults else "with no vaults configured it watches every vault in the "
                       "index: stop it, drop the vault, and start it again")
                return {"ok": False, "code": "UsageError",
                        "error": f"the daemon watches vault {', '.join(watched)}: {how}"}
            work = self.enqueue(Work("call", fn=lambda idx: idx.drop_vaults(drop).__dict__, done=threading.Event()))
        elif req.get("rebuild"):
            def rebuild(idx: VaultIndex) -> dict:
                self.rebuilding = True
                try:
                    idx.rebuild()
                    self._refresh()  # the reader sees the empty index, and every answer says why
                    self._progress_said = time.monotonic()
                    with bulk_heap():
                        return idx.sync(list(self.vaults.values()), progress=self._progress).__dict__
                finally:
                    self.progress = None
                    self.rebuilding = False
            work = self.enqueue(Work("call", fn=rebuild, done=threading.Event()))
        else:
            work = self.enqueue(Work("reconcile", reason="requested", done=threading.Event()))
        work.done.wait()
        result = work.result.get("value", work.result)
        if "exception" in work.result:
            err = work.result["exception"]
            return {"ok": False, "code": type(err).__name__ if isinstance(err, VaultmemError) else "reindex_failed",
                    "error": str(err)}
        return {"ok": True, "report": {k: v for k, v in result.items() if k != "problems"},
                "problems": result.get("problems", {})}
