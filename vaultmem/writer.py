"""The daemon's writer: one thread that owns the writable index and applies every change in
batches: the paths the watches report (a burst becomes one batch), full reconciles (at start-up,
on a schedule, after lost events or a failed batch), upkeep (compaction), and the write
requests of clients (`call` work: remember, forget, reindex). When nothing else waits, it embeds
the vectors of notes a big reconcile wrote without them ([daemon] vectors_later_at: a first
index is searchable by words at parsing speed), a few notes at a time, so an edit never waits
long. A batch that fails is retried after a growing wait; what was left undone is pending in
the catalog and redone by the next reconcile. After each batch that changed something the
daemon's reader is refreshed (`refresh`), so a query sees all of a batch or none of it.

Nothing else writes the index; nothing here answers a client (daemon.py) or decides what to
watch (watches.py, whose map of symlinked notes the writer keeps up to date).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from . import heap
from .config import Settings, Vault
from .embedders import fast_tokenizer
from .errors import VaultmemError, is_disk_full
from .index import SyncReport, VaultIndex
from .service import sd_notify
from .usage import Usage

log = logging.getLogger("vaultmem.daemon")

RETRY_MAX_SECONDS = 300.0  # the longest wait before a reconcile after failed write batches
PROGRESS_SECONDS = 10.0  # how often a long reconcile says how far it is
FILL_NOTES = 64  # notes given their vectors in one step (~0.2 s): an edit waits no longer than that
FILL_RETRY_SECONDS = 60.0  # after a failed step, the next one waits this long
# fill steps between compactions of the vector table: at least this many, and as many as the
# notes embedded before the last one make (each compaction rewrites the whole table, so spaced
# out as it grows they rewrite it a few times in all, not once every 50 steps)
FILL_OPTIMIZE_STEPS = 50


def _iso(ts: float | None) -> str | None:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds") if ts else None


@dataclass
class Work:
    kind: str  # "path" | "reconcile" | "links" | "optimize" | "call" | "stop"
    vault: str = ""
    rel: str = ""
    reason: str = ""
    fn: Callable[[VaultIndex], Any] | None = None
    done: threading.Event | None = None
    result: dict[str, Any] = field(default_factory=dict)


class Writer:
    """The writer thread and its queue of Work."""

    def __init__(self, settings: Settings, index: VaultIndex, vaults: dict[str, Vault], watches: Any,
                 usage: Usage | None, refresh: Callable[[], None], ready: Callable[[], bool]):
        """`index`: the writable index; `vaults` (name -> Vault) the ones kept in line; `watches`:
        the daemon's (watches.Watches: its map of symlinked notes is kept here); `refresh`: makes
        the daemon's reader see what a batch committed; `ready`: whether the start-up reconcile
        is done (at start-up, READY=1 says what it did, not the progress line)."""
        self.settings = settings
        self.index = index
        self.vaults = vaults
        self.watches = watches
        self.usage = usage
        self.refresh = refresh
        self.ready = ready
        self.queue: queue.Queue[Work] = queue.Queue()
        self.in_flight = 0  # items of the batch in hand: pending until searchable
        self.last_reconcile: dict[str, Any] | None = None
        self.commits_since_optimize = 0
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
        # notes written without vectors, embedded between batches: how many are left, and how
        # many there were when the filling began (the progress line)
        index.vectors_later_at = settings.daemon.vectors_later_at
        self.vectors_left = index.catalog.unembedded_count()
        self._fill_from = self.vectors_left
        self._fill_compacted = 0  # notes of the backlog embedded at its last compaction (_fill_step)
        self._fill_started = time.monotonic()
        self._fill_paused_until = 0.0
        self._fill_paused_for_room = False  # paused by a full disk: a write that succeeds ends the pause
        every = index.imported_all()
        self.imported = {name: frozenset(every.get(name, ())) for name in vaults}  # as last indexed
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="vaultmem-writer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 120) -> None:
        """Finish the batch in hand and commit; no retry is left waiting."""
        if self._retry is not None:
            self._retry.cancel()
        if self._thread is not None:
            self.queue.put(Work("stop"))
            self._thread.join(timeout=timeout)

    def path(self, vault: str, rel: str) -> None:
        """A file or directory of a vault to look at (a watch's event)."""
        self.enqueue(Work("path", vault=vault, rel=rel))

    def reconcile(self, reason: str) -> Work:
        return self.enqueue(Work("reconcile", reason=reason))

    def call(self, fn: Callable[[VaultIndex], Any]) -> Work:
        """Run `fn(index)` on the writer thread; the returned Work's `done` is set when it has
        (its result in `result`: "value" or "exception")."""
        return self.enqueue(Work("call", fn=fn, done=threading.Event()))

    def pending(self) -> int:
        return self.queue.qsize() + self.in_flight

    def imported_of(self, vault: str) -> frozenset[str]:
        return self.imported.get(vault, frozenset())

    def enqueue(self, work: Work) -> Work:
        self.queue.put(work)
        return work

    def _drain(self, batch: list[Work]) -> None:
        while True:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                return

    def _loop(self) -> None:
        debounce = self.settings.daemon.debounce_ms / 1000.0
        while True:
            first = self._next()
            if first is None:
                self._fill_step()
                continue
            batch = [first]
            self._drain(batch)
            if debounce and any(w.kind == "path" for w in batch):
                time.sleep(debounce)  # the rest of an editor's save (temp file, rename) arrives
                self._drain(batch)
            stop = any(w.kind == "stop" for w in batch)
            self.in_flight = len(batch)  # counted as pending until searchable
            try:
                self._apply(batch)
                self.write_failure = None
                if self._fill_paused_for_room:  # the disk has room again: the vectors need not wait
                    self._fill_paused_until, self._fill_paused_for_room = 0.0, False
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
            backlog = self._count_vectors_left()
            for w in batch:
                if w.done is not None:
                    w.done.set()
            if stop:
                return
            if backlog:
                try:
                    self._begin_fill()
                except Exception as err:  # the fill steps meet it again, and say it (a full disk in one line)
                    log.debug("readying the background embedding failed: %s", err)

    def _next(self) -> Work | None:
        """The next work to do; None when notes wait for their vectors and nothing else is
        asked (a fill step is due)."""
        if not self.vectors_left:
            return self.queue.get()
        wait = self._fill_paused_until - time.monotonic()
        try:
            return self.queue.get(timeout=wait) if wait > 0 else self.queue.get_nowait()
        except queue.Empty:
            return None

    def _count_vectors_left(self) -> bool:
        """Count the notes left without vectors; True when a new backlog of them begins."""
        left = self.index.catalog.unembedded_count()
        begins = False
        if left > self.vectors_left or not self.vectors_left:  # a new backlog: its progress from here
            self._fill_from, self._fill_started = left, time.monotonic()
            self._fill_compacted = 0
            begins = left > 0
        self.vectors_left = left
        return begins

    def _begin_fill(self) -> None:
        """Ready what embedding a backlog in the background needs: room in the in-memory vectors,
        the tokenizer's table of prefixes, and so the model and the vector table. Done after the
        batch's waiters are told: a first index is searchable by words (the daemon ready) without
        waiting for them (~0.7 s at 10,000 notes)."""
        self.index.vectors.expect(self.index.catalog.unembedded_chunks())
        fast_tokenizer(self.index.embedder, True)  # its table of prefixes while a backlog is embedded

    def _fill_step(self) -> None:
        """Embed the vectors of a few notes that have none yet, and let the readers see them."""
        try:
            with heap.bulk_heap():
                self.index.fill_vectors(FILL_NOTES)
        except Exception as err:  # the notes stay searchable by words; tried again later
            self._fill_paused_until = time.monotonic() + FILL_RETRY_SECONDS
            self._fill_paused_for_room = is_disk_full(err)
            if self._fill_paused_for_room:
                log.error("%s; embedding the notes left without vectors waits %.0f s (or until a write succeeds)",
                          err, FILL_RETRY_SECONDS)
            else:
                log.exception("embedding the vectors of notes left without them failed; tried again in %.0f s",
                              FILL_RETRY_SECONDS)
            return
        self.vectors_left = self.index.catalog.unembedded_count()
        self.commits_since_optimize += 1
        done = self._fill_from - self.vectors_left
        if self.vectors_left and self.commits_since_optimize >= max(FILL_OPTIMIZE_STEPS, self._fill_compacted // FILL_NOTES):
            # each append writes a manifest listing every fragment (in process, an append of 64
            # rows took 3.3 ms beside 50 small fragments, 3.9 ms beside 400), and a compaction
            # rewrites the whole table, +25-40 MB for a moment: every 50 steps, the last ones took
            # a first index of 50,000 notes to its 471 MB peak near the end (440 MB now)
            self.index.optimize()
            self.commits_since_optimize, self._fill_compacted = 0, done
        self.refresh()
        now = time.monotonic()
        if not self.vectors_left:
            line = f"vectors of {self._fill_from:,} notes embedded in {now - self._fill_started:.1f} s"
            log.info("%s", line)
            self.index.vectors.expect(0)
            fast_tokenizer(self.index.embedder, False)  # and the compact one again (34 MB less)
            heap.return_free_memory()
            self.enqueue(Work("optimize"))  # hundreds of small appends: compact them, as after a bulk load
            if self._progress_told:
                self._progress_told = not sd_notify(f"STATUS=watching {len(self.vaults)} vault(s); {line}")
        elif now - self._progress_said >= PROGRESS_SECONDS:
            self._progress_said = now
            line = (f"embedding in the background: vectors of {done:,} of {self._fill_from:,} notes "
                    "(searchable by words meanwhile)")
            log.info("%s", line)
            self._progress_told = sd_notify(f"STATUS={line}") or self._progress_told

    @property
    def vectors_progress(self) -> dict[str, int] | None:
        """For status while notes wait for their vectors."""
        if not self.vectors_left:
            return None
        return {"notes_embedded": self._fill_from - self.vectors_left, "notes_to_embed": self._fill_from}

    def read_all(self) -> SyncReport:
        """A full reconcile of the vaults, its progress kept for status and told as it goes."""
        self._progress_said = time.monotonic()  # a reconcile shorter than PROGRESS_SECONDS says nothing
        try:
            with heap.bulk_heap():
                return self.index.sync(list(self.vaults.values()), progress=self.report_progress)
        finally:
            self.progress = None

    def report_progress(self, done: int, total: int, embedded: int) -> None:
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
        assert self.index is not None
        t0 = time.perf_counter()
        report = SyncReport()
        reconcile = [w for w in batch if w.kind == "reconcile"]
        if reconcile:
            report = self.read_all()
            if self._progress_told and self.ready():  # at start-up, READY=1 says what is done
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
                with heap.bulk_heap():
                    r = self.index.update(v, rels)
                moved = self.watches.links.update(v, rels | {key.split(":", 1)[1] for rel in rels if os.path.isdir(v.root / rel)
                                                     for key in self.index.catalog.files(name, under=rel)})
                for _, rel in moved:  # read before the map knew them: an edit since found no note
                    self.enqueue(Work("path", vault=name, rel=rel))
                for k in ("added", "updated", "removed", "skipped", "chunks_embedded", "chunks_reused", "marked"):
                    setattr(report, k, getattr(report, k) + getattr(r, k))
                report.problems.update(r.problems)
                report.moved.update(r.moved)
            if paths:
                self.watches.watch_links()
            if report.changes:
                log.info("applied %d changed path(s) in %.0f ms: %d added, %d updated, %d removed, %d skipped; "
                         "%d chunks embedded", sum(len(r) for r in paths.values()), (time.perf_counter() - t0) * 1000,
                         report.added, report.updated, report.removed, report.skipped, report.chunks_embedded)
                if report.marked:
                    log.info("superseded_by line updated in %d note(s) (mark_superseded)", report.marked)
                for key, reason in report.problems.items():
                    log.warning("skipped %s: %s", key, reason)
        self.embedded_since_release += report.chunks_embedded
        if self.embedded_since_release >= heap.RELEASE_AFTER_CHUNKS or (reconcile and report.changes > 100):
            self.embedded_since_release = 0
            before = heap.rss_mb()
            heap.return_free_memory()
            log.info("gave back memory after the work: RSS %.0f -> %.0f MB", before, heap.rss_mb())
        if report.moved and self.usage is not None:
            carried = self.usage.follow(report.moved)
            log.info("%d note(s) moved; usage records of %d carried to the new paths", len(report.moved), carried)
        for w in batch:
            if w.kind == "call" and w.fn is not None:
                try:
                    w.result["value"] = w.fn(self.index)
                except Exception as err:  # handed back to the requester, whose answer says it
                    if not isinstance(err, VaultmemError):
                        log.exception("a write request failed")
                    w.result["exception"] = err
        if report.changes or any(w.kind == "call" for w in batch):
            self.commits_since_optimize += 1
            self.refresh()
            self.follow_imports()
        if any(w.kind == "links" for w in batch):
            for v in self.vaults.values():
                self.watches.links.reset(v, self.index.catalog.paths(v.name))
            self.watches.watch_links()
            # their targets may have changed since the reconcile read them, when nothing watched
            # where they are: each is looked at once more (a stat when unchanged)
            for name, rel in self.watches.links.paths():
                self.enqueue(Work("path", vault=name, rel=rel))
        wants_optimize = any(w.kind == "optimize" for w in batch)
        if reconcile and report.changes >= self.settings.index.batch_files:
            # a bulk load (the first index, an upgrade that re-reads every note) leaves the
            # vector table in hundreds of fragments: at 10,000 notes the daemon stayed ~45 MB
            # bigger until the hourly compaction. Compact next, once the reconcile has answered.
            self.enqueue(Work("optimize"))
        if wants_optimize or self.commits_since_optimize >= self.settings.daemon.optimize_after_commits:
            t = time.perf_counter()
            self.index.optimize()
            self.commits_since_optimize = 0
            self.refresh()
            log.info("optimized the indexes in %.0f ms", (time.perf_counter() - t) * 1000)
        log.debug("batch of %d item(s) in %.1f ms", len(batch), (time.perf_counter() - t0) * 1000)

    def follow_imports(self) -> None:
        """Keep the files the CLAUDE.md files import (index.imported) watched as notes. A file
        imported from now on is looked at once more: an edit made while the writer read the
        CLAUDE.md that imports it was not yet its to see."""
        assert self.index is not None
        every = self.index.imported_all()
        for name in self.vaults:
            now = frozenset(every.get(name, ()))
            for rel in sorted(now - self.imported.get(name, frozenset())):
                self.enqueue(Work("path", vault=name, rel=rel))
            self.imported[name] = now
