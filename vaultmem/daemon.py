"""The daemon: keeps the index in line with the vaults and answers requests on a Unix socket.
It composes four parts and owns their life cycle (start, SIGHUP reload, shutdown):

- watches.py: the watches of the vaults and of symlinked notes' real directories, and whether
  they hold; events become the writer's work.
- writer.py: one thread that owns the writable VaultIndex (Tantivy writer, LanceDB table,
  catalog writes) and applies every change, reconcile, upkeep job and write request in batches.
  After each batch it refreshes the reader (`_refresh`).
- server.py: the socket; each connection's thread hands request lines to `handle_line`, which
  answers with the read-only VaultIndex, one query at a time (the read lock), so searches never
  see a half-refreshed reader.
- APScheduler's thread only enqueues upkeep (reconcile, compaction, inventory, watch checks).

Nothing here writes a note; the requests themselves are ops.py's (shared with the CLI's
in-process path) or this file's op_* methods (ping, status, reindex).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable

from . import __version__, heap, inventory, ops
from .catalog import indexed_vaults
from .client import REBUILDING, STILL_INDEXING, socket_problem
from .config import Settings, Vault, default_config_path
from .embedders import fast_tokenizer, private_cache
from .errors import DiskFullError, IndexDamagedError, IndexRemadeError, UsageError, VaultmemError, is_disk_full
from .index import VaultIndex
from .query import check_unicode
from .search import Searcher
from .server import SocketServer
from .service import sd_notify
from .usage import Usage
from .watches import ROOT_CHECK_SECONDS, Watches
from .writer import Work, Writer, _iso

if TYPE_CHECKING:  # imported once the daemon is ready: 58 ms (asyncio with it) before the first reconcile
    from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger("vaultmem.daemon")


class _Context(ops.Context):
    """How the shared operations reach the daemon's index: reads under the read lock with the
    reader, writes on the writer thread (the reader is refreshed before the answer)."""

    def __init__(self, daemon: "Daemon"):
        self.daemon = daemon
        self.settings = daemon.settings
        assert daemon.usage is not None, "made when the daemon starts"
        self.usage = daemon.usage

    def read(self, fn):
        d = self.daemon
        with d.read_lock:
            try:
                return fn(d.reader, d.searcher)
            except IndexRemadeError:  # the writer made an engine anew under it: the new one answers
                return fn(d.reader, d.searcher)

    def incomplete(self) -> str | None:
        d = self.daemon
        if d.reader_rebuilding:
            return REBUILDING
        return STILL_INDEXING if not d.ready else None

    def write(self, fn):
        work = self.daemon.writer.call(fn)
        work.done.wait()
        if "exception" in work.result:
            raise work.result["exception"]
        if "value" not in work.result:
            raise VaultmemError("the write failed; see the daemon's log")
        return work.result["value"]

    def vaults(self, idx: VaultIndex) -> list[Vault]:
        return list(self.daemon.vaults.values())

    def about(self, status: dict) -> None:
        d = self.daemon
        assert d.writer is not None and d.watches is not None
        status.update({
            "version": __version__, "pid": os.getpid(), "ready": d.ready, "progress": d.writer.progress,
            "rebuilding": d.rebuilding, "generation": d.generation,
            "pending": status["pending"] + d.writer.pending(),  # the writer's queue, and half-indexed notes
            "socket": d.socket_path, "last_reconcile": d.writer.last_reconcile, "watch": d.watches.status,
            "write_failure": d.writer.write_failure, "vectors_progress": d.writer.vectors_progress,
            "last_inventory": _iso(inventory.last_saved(d.settings.state_dir)),
            "uptime_s": round(time.time() - d.started, 1),
            "config_file": str(d._config_path), "config_changed": d.config_changed(),
        })

    def sync(self, rebuild: bool) -> dict:
        d, writer = self.daemon, self.daemon.the_writer()
        if not rebuild:
            done = threading.Event()
            work = writer.enqueue(Work("reconcile", reason="requested", done=done))
            done.wait()
            if "summary" not in work.result:
                raise VaultmemError("the reconcile failed; see the daemon's log")
            return work.result

        def run(idx: VaultIndex) -> dict:
            d.rebuilding = True
            # said before anything is emptied: the reader shares the catalog's file (and the
            # vectors in memory) with the writer, so it sees the cleared catalog as soon as it is
            # committed, before _refresh; in between, a query answered short and did not say why
            with d.read_lock:
                d.reader_rebuilding = True
            try:
                idx.rebuild()
                d._refresh()  # the reader sees the empty index, and every answer says why
                return writer.read_all().__dict__
            finally:
                d.rebuilding = False
        return self.write(run)

    def can_drop(self, names: list[str]) -> None:
        watched = sorted(set(names) & set(self.daemon.vaults))
        if watched:
            how = ("take it out of the config, reload the daemon (`systemctl --user reload vaultmem`; one "
                   "started with --vault flags: restart it without), then drop it"
                   if self.settings.vaults else "with no vaults configured it watches every vault in the "
                   "index: stop it, drop the vault, and start it again")
            raise UsageError(f"the daemon watches vault {', '.join(watched)}: {how}")


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
        self.stop_event = threading.Event()
        self.read_lock = threading.Lock()
        self.generation = 0
        self.ready = False
        self.rebuilding = False  # `index --rebuild` runs: answers miss the notes not read again yet
        # the reader was last refreshed while a rebuild ran: set with the reader, under the read
        # lock, so that an answer read from a half-rebuilt index always says so (`rebuilding`
        # turns False a moment before the reader sees the finished index)
        self.reader_rebuilding = False
        self.started = time.time()
        self.vaults: dict[str, Vault] = {}
        self.writer: Writer | None = None
        self.watches: Watches | None = None
        self.server: SocketServer | None = None
        self.reader: VaultIndex | None = None
        self.usage: Usage | None = None
        self.ctx: _Context | None = None
        self.searcher: Searcher | None = None
        self.scheduler: BackgroundScheduler | None = None
        self._writer_resets = 0  # the writer's count of engines made anew, as the reader last opened them

    def the_writer(self) -> Writer:
        assert self.writer is not None, "the writer is made when the daemon starts"
        return self.writer

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
                self.writer.index.check_embedder(settings)
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
        heap.tune_malloc()
        # a long-lived process: the model's word table is served from a file map (embedders.py)
        index = self._open_writer()
        if index is None:  # stopped while it waited for room
            return
        try:
            index.check_embedder()  # exit 4, said once: a write would fail again and again
            vaults = index.served()
            if not vaults:
                raise VaultmemError("no vault to watch: pass --vault DIR (or set vaults in the config file)")
        except VaultmemError:
            index.close()
            raise
        for v in vaults:
            index.catalog.put_vault(v)
        self.vaults = {v.name: v for v in vaults}
        for v in index.vaults():
            if v.name not in self.vaults:
                log.warning("vault %s (%s) is in the index but not in the config: its notes are answered as last "
                            "indexed and not updated; `vaultmem reindex --drop-vault %s` takes them out",
                            v.name, v.root, v.name)
        self.reader = VaultIndex(self.settings, writable=False, share_vectors_of=index, model_cache=private_cache())
        self._writer_resets = index.resets
        self.usage = Usage(self.settings.state_dir)
        self.searcher = Searcher(self.reader, self.usage)
        self.ctx = _Context(self)
        self.watches = Watches(self.settings, self.vaults, on_path=lambda vault, rel: self.the_writer().path(vault, rel),
                               on_reconcile=lambda reason: self.the_writer().reconcile(reason),
                               imported=lambda vault: self.the_writer().imported_of(vault))
        self.writer = Writer(self.settings, index, self.vaults, self.watches, self.usage, refresh=self._refresh,
                             ready=lambda: self.ready)
        self.server = SocketServer(self.settings, self.socket_path, self.handle_line)
        self.server.bind(self.started)
        self.writer.start()
        self.server.serve()
        # watchdog 7.1 warns when it adds a watch it already holds: a new directory tree is walked
        # on its creation event and its subdirectories' own events add them again. The callback
        # is replaced by itself, so nothing is wrong, but the message prints a bound method's repr
        # holding the whole watch table: one `pip install` in a vault wrote 41 MB of log.
        warnings.filterwarnings("ignore", message="Callback with id .* already exists for watch",
                                category=RuntimeWarning)
        self.watches.start()
        # the start-up reconcile runs on the writer thread, after the watch is up, so no edit
        # falls between the scan and the watch
        done = threading.Event()
        work = self.writer.enqueue(Work("reconcile", reason="start-up", done=done))
        while not done.wait(0.5):
            if self.stop_event.is_set():
                return
        self.ready = True
        self.scheduler = self.watches.scheduler = self._schedule()
        summary = work.result.get("summary") or "the start-up reconcile failed; it is retried"
        sd_notify(f"READY=1\nSTATUS=watching {len(vaults)} vault(s), {summary}")
        log.info("ready: %s; serving %s", summary, self.socket_path)
        self.watches.check(rewatch=False)  # after readiness: it walks every directory of the vaults
        threading.Thread(target=self._warm_up, name="vaultmem-warm-up", daemon=True).start()

    def _schedule(self) -> BackgroundScheduler:
        """The upkeep on a clock: reconcile, compaction, inventory, and the watch checks."""
        from apscheduler.schedulers.background import BackgroundScheduler

        assert self.writer is not None and self.watches is not None
        scheduler = BackgroundScheduler(daemon=True)
        cfg, writer = self.settings.daemon, self.writer
        if cfg.reconcile_minutes > 0:
            scheduler.add_job(lambda: writer.reconcile("scheduled"), "interval", minutes=cfg.reconcile_minutes,
                              id="reconcile")
        if cfg.optimize_minutes > 0:
            scheduler.add_job(lambda: writer.enqueue(Work("optimize")), "interval", minutes=cfg.optimize_minutes,
                              id="optimize")
        inv = self.settings.inventory
        if inv.every_days > 0 and inv.check_minutes > 0:
            scheduler.add_job(self._inventory_if_due, "interval", minutes=inv.check_minutes, id="inventory")
        scheduler.add_job(self.watches.check, "interval", minutes=max(1.0, cfg.reconcile_minutes or 15.0),
                          id="watch-check")
        scheduler.add_job(self.watches.check_roots, "interval", seconds=ROOT_CHECK_SECONDS, id="root-check")
        scheduler.start()
        return scheduler

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

    def _warm_up(self) -> None:
        """Load what the first query needs (LanceDB and its in-memory copy, the embedding model)
        after readiness, not before: a restart on an unchanged vault needs neither."""
        t = time.perf_counter()
        try:
            assert self.reader is not None
            # no read lock: loading takes seconds and must not hold up status or queries
            self.reader.vectors.search(self.reader.embedder.embed_query(["warm up"])[0], 1)
        except IndexRemadeError:  # a rebuild or repair began meanwhile: its table is loaded by the next query
            log.info("warm-up stopped: the vector index was made anew meanwhile")
            return
        except Exception as err:  # warming is an optimisation; the first query will load what it needs
            if is_disk_full(err):  # the vector table is made with its first vectors (after the words)
                log.warning("warm-up stopped: %s", err)
            else:
                log.exception("warm-up failed")
            return
        if self.writer is not None and not self.writer.vectors_left:  # else the background embedding uses it
            fast_tokenizer(self.reader.embedder, False)  # the model, and so its tokenizer, is shared
        heap.return_free_memory()  # loading the model leaves tens of MB of freed heap behind
        log.info("warmed up in %.1f s", time.perf_counter() - t)

    def _inventory_if_due(self) -> None:
        """The scheduled stock-take: save a report when the last one is `every_days` old."""
        last = inventory.last_saved(self.settings.state_dir)
        if last is not None and time.time() - last < self.settings.inventory.every_days * 86400:
            return
        try:
            ctx, usage = self.ctx, self.usage
            assert ctx is not None and usage is not None, "the daemon has started"
            report = ctx.read(lambda idx, _: inventory.take(idx, usage, self.settings))
            path = inventory.save(report, self.settings.state_dir)
        except Exception:
            log.exception("the scheduled inventory failed")
            return
        c = report["counts"]
        log.info("inventory saved to %s: %s", path, "clean" if report["clean"] else
                 ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in c.items() if n))


    def shutdown(self, reloading: bool = False) -> None:
        log.info("stopping")
        if reloading:  # the same pid sends READY=1 again once it has started over
            sd_notify(f"RELOADING=1\nMONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}")
        else:
            sd_notify("STOPPING=1")
        if self.watches is not None:
            self.watches.stop()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        if self.writer is not None:
            self.writer.stop()  # finishes the batch in hand, commits
        if self.server is not None:
            self.server.close()
        if self.watches is not None:
            self.watches.join()
        if self.reader is not None:
            self.reader.close()
        if self.writer is not None:
            self.writer.index.close()
        if self.usage is not None:
            self.usage.close()
        log.info("stopped")

    def _refresh(self) -> None:
        """Make the reader see what the writer committed (the writer thread, after a batch)."""
        with self.read_lock:
            assert self.reader is not None and self.writer is not None
            index = self.writer.index
            if index.resets != self._writer_resets:  # an engine was made anew: the files it read are gone
                self._writer_resets = index.resets
                self.reader.close()
                self.reader = VaultIndex(self.settings, writable=False, share_vectors_of=index)
                self.searcher = Searcher(self.reader, self.usage)
            else:
                self.reader.refresh()
            self.reader_rebuilding = self.rebuilding
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
                self.the_writer().reconcile("a query found the index unreadable")
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
        ctx = self.ctx
        if op in ops.OPS and ctx is not None:
            return lambda req: ops.OPS[op](ctx, req)
        return None

    def op_ping(self, req: dict) -> dict:
        return {"ok": True, "version": __version__, "state_dir": str(self.settings.state_dir)}
