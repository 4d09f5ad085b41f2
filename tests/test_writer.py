"""The daemon's writer (writer.py) in this process, on a real index: its batches, what it tells
systemd, the notes it reads again, and the heap it keeps for bulk work (heap.py). The queue is
run by hand here (`_apply`), not by the writer thread, so each step can be looked at."""

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import vaultmem.writer as wrmod
from conftest import atomic_save
from vaultmem.config import resolve
from vaultmem.index import VaultIndex
from vaultmem.watches import Watches
from vaultmem.watching import make_observer
from vaultmem.writer import Work, Writer


@contextlib.contextmanager
def writer_in_process(tmp_path, vault, ready=True):
    """A Writer of vault `vault` on a real index, its watches on an observer that is not
    started (no event comes), its queue not served."""
    settings = resolve({"state_dir": str(tmp_path / "s"), "vaults": [f"v={vault}"]}, env={})
    vaults = {v.name: v for v in settings.vaults}
    index = VaultIndex(settings, writable=True)
    reader = VaultIndex(settings, writable=False, share_vectors_of=index)
    holder: dict = {}
    watches = Watches(settings, vaults, on_path=lambda v, rel: holder["w"].path(v, rel),
                      on_reconcile=lambda reason: holder["w"].reconcile(reason),
                      imported=lambda v: holder["w"].imported_of(v))
    watches.observer = make_observer()
    writer = holder["w"] = Writer(settings, index, vaults, watches, None, refresh=reader.refresh,
                                  ready=lambda: ready)
    try:
        yield writer
    finally:
        reader.close()
        index.close()


def test_a_long_reconciles_progress_is_told_to_systemd_and_then_what_it_did(tmp_path, monkeypatch):
    """On a real notify socket: a reconcile that runs past PROGRESS_SECONDS (0 here) puts its
    progress on systemd's status line, and once done, what it did (a reconcile after
    readiness; at start-up READY=1 says it)."""
    vault = tmp_path / "vault"
    for i in range(3):
        atomic_save(vault / f"memory/n{i}.md", f"note {i} on ibis\n")
    notify = tmp_path / "notify.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(str(notify))
    srv.settimeout(60)
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify))
    monkeypatch.setattr(wrmod, "PROGRESS_SECONDS", 0.0)
    with writer_in_process(tmp_path, vault) as w:
        w._apply([Work("reconcile", reason="test")])
    told = [srv.recv(4096).decode() for _ in range(2)]
    srv.close()
    assert told == ["STATUS=reading notes: 0 of 3 files, 0 chunks embedded",
                    "STATUS=watching 1 vault(s), 3 files: 3 added, 0 updated, 0 removed, 0 unchanged, 0 skipped; "
                    + told[1].split("; ", 1)[1]]
    assert told[1].split("; ", 1)[1].startswith("3 chunks embedded") and w.progress is None


def test_a_note_pointed_at_a_new_file_is_read_again_once_the_daemon_knows_the_link(tmp_path):
    """`ln -sfn ~/dotfiles/NEW.md CLAUDE.md`, then NEW.md saved while the daemon reads CLAUDE.md:
    that save's event found no note (the daemon learns where CLAUDE.md points after reading
    it), so the note is read once more when its link is learnt. The save made right after the
    writer's read, with no watch running: only that second read can bring it. (The race, seen
    in a real daemon under load: the edit never searchable.)"""
    vault, dot = tmp_path / "vault", tmp_path / "dotfiles"
    atomic_save(dot / "OLD.md", "# Global\n\nthe echidna\n")
    atomic_save(dot / "NEW.md", "# Global\n\nthe jerboa\n")
    vault.mkdir()
    (vault / "CLAUDE.md").symlink_to(dot / "OLD.md")
    with writer_in_process(tmp_path, vault) as w:
        def run_queue():
            while not w.queue.empty():
                w._apply([w.queue.get_nowait()])

        def texts():
            return {w.index.catalog.chunks_of(["v:CLAUDE.md"])[0].text.split()[-1]}
        w._apply([Work("reconcile", reason="test")])
        run_queue()
        assert texts() == {"echidna"}
        (vault / ".CLAUDE.md.new").symlink_to(dot / "NEW.md")
        os.replace(vault / ".CLAUDE.md.new", vault / "CLAUDE.md")
        update = w.index.update

        def read_then_saved(v, rels):
            out = update(v, rels)
            if texts() == {"jerboa"}:  # the read of the new target done: the save lands now
                atomic_save(dot / "NEW.md", "# Global\n\nthe kinkajou\n")
            return out
        w.index.update = read_then_saved
        w._apply([Work("path", vault="v", rel="CLAUDE.md")])
        w.index.update = update
        assert [(x.kind, x.rel) for x in list(w.queue.queue)] == [("path", "CLAUDE.md")]
        run_queue()
        assert texts() == {"kinkajou"}
        w._apply([Work("path", vault="v", rel="CLAUDE.md")])
        assert w.queue.empty()  # a link that still points there is not read again


def test_a_failed_batch_is_retried_by_a_reconcile_and_said_in_status(tmp_path):
    """A write batch that raises does not stop the writer thread: the failure is kept for
    status, and a reconcile follows (the first at once), which clears it once it succeeds."""
    vault = tmp_path / "vault"
    atomic_save(vault / "memory/a.md", "the axolotl\n")
    with writer_in_process(tmp_path, vault) as w:
        sync, calls = w.index.sync, []

        def fails_once(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise OSError("the disk said no")
            return sync(*args, **kwargs)
        w.index.sync = fails_once
        w.start()
        try:
            work = w.enqueue(Work("reconcile", reason="test", done=threading.Event()))
            assert work.done.wait(60)
            assert w.write_failure["error"] == "the disk said no" and w.write_failure["failures"] == 1
            deadline = time.time() + 60
            while (w.write_failure is not None or w.pending()) and time.time() < deadline:
                time.sleep(0.05)
            assert w.write_failure is None and len(calls) >= 2
            assert w.index.catalog.counts()["notes"] == 1
        finally:
            w.stop()


@pytest.mark.skipif(os.uname().sysname != "Linux" or __import__("platform").libc_ver()[0] != "glibc",
                    reason="glibc's malloc settings")
def test_the_tokenizers_prefix_table_is_made_for_a_backlog_and_dropped_once_it_is_embedded(tmp_path, monkeypatch):
    """The daemon keeps its tokenizer compact (34 MB less) but while it embeds a backlog in the
    background: the writer makes the package's table of prefixes when notes are left without
    vectors and drops it when the last of them has its vector."""
    from vaultmem.embedders import SortedPieces, fast_tokenizer
    vault = tmp_path / "vault"
    for i in range(12):
        atomic_save(vault / f"memory/n{i:02d}.md", f"# Note {i}\n\nthe axolotl {i} swims\n")
    with writer_in_process(tmp_path, vault) as w:
        tokenizer = w.index.embedder._model._sp  # the process's one model: put back below
        try:
            fast_tokenizer(w.index.embedder, False)  # as the daemon leaves it after its warm-up
            w.index.vectors_later_at = 5  # a reconcile of 5 notes or more leaves their vectors for later
            w._apply([Work("reconcile", reason="test")])
            assert w._count_vectors_left()  # as the writer's loop does after each batch
            w._begin_fill()  # ... and, a backlog begun, after telling the batch's waiters
            assert w.vectors_left == 12 and isinstance(tokenizer._prefixes, dict)
            monkeypatch.setattr(wrmod, "FILL_NOTES", 5)
            w._fill_step()
            assert w.vectors_left == 7 and isinstance(tokenizer._prefixes, dict)
            while w.vectors_left:
                w._fill_step()
            assert isinstance(tokenizer._prefixes, SortedPieces)
            assert w.index.vectors.count() == 12
        finally:
            fast_tokenizer(w.index.embedder, True)


def test_a_first_index_is_searchable_before_its_background_embedding_is_readied(tmp_path, monkeypatch):
    """Readying the background embedding of a backlog loads the model and opens the vector
    table (~0.7 s); a reconcile's waiter (the daemon's start-up: it is ready when told) is told
    first, so a first index is searchable by words that much sooner."""
    vault = tmp_path / "vault"
    for i in range(8):
        atomic_save(vault / f"memory/n{i}.md", f"# Note {i}\n\nthe numbat {i} digs\n")
    with writer_in_process(tmp_path, vault) as w:
        w.index.vectors_later_at = 5
        done = threading.Event()
        told: list[bool] = []
        begin = w._begin_fill

        def readied() -> None:
            told.append(done.is_set())
            begin()
        monkeypatch.setattr(w, "_begin_fill", readied)
        w.start()
        try:
            w.enqueue(Work("reconcile", reason="start-up", done=done))
            assert done.wait(60)
            deadline = time.monotonic() + 60
            while not told and time.monotonic() < deadline:
                time.sleep(0.01)
            assert told == [True]
            while w.vectors_left and time.monotonic() < deadline:  # and then the backlog is embedded
                time.sleep(0.01)
        finally:
            w.stop()
        assert w.index.vectors.count() == 8


def test_a_long_fill_compacts_the_vector_table_less_often_as_it_grows(tmp_path, monkeypatch):
    """Each compaction rewrites the whole vector table: through a first index they come after
    FILL_OPTIMIZE_STEPS steps, then after as many steps as the notes embedded before the last
    one make (a few rewrites in all, not one every 50 steps, the last ones at the table's
    biggest). Here 2 notes a step, at least 2 steps: after 4, 8, 16 and 32 of 40 notes, none
    after the last step (the writer asks for one then)."""
    vault = tmp_path / "vault"
    for i in range(40):
        atomic_save(vault / f"memory/n{i:02d}.md", f"# Note {i}\n\nthe quoll {i} hunts\n")
    with writer_in_process(tmp_path, vault) as w:
        w.index.vectors_later_at = 5
        w._apply([Work("reconcile", reason="test")])
        assert w._count_vectors_left()
        w._begin_fill()
        monkeypatch.setattr(wrmod, "FILL_NOTES", 2)
        monkeypatch.setattr(wrmod, "FILL_OPTIMIZE_STEPS", 2)
        compacted_at: list[int] = []
        optimize = w.index.optimize

        def counted():
            compacted_at.append(40 - w.index.catalog.unembedded_count())
            optimize()
        monkeypatch.setattr(w.index, "optimize", counted)
        w.commits_since_optimize = 0
        while w.vectors_left:
            w._fill_step()
        assert compacted_at == [4, 8, 16, 32]
        queued = []
        while not w.queue.empty():
            queued.append(w.queue.get_nowait().kind)
        assert w.index.vectors.count() == 40 and "optimize" in queued


def test_the_writers_bulk_work_keeps_big_blocks_on_the_heap_and_sets_the_daemons_thresholds_back():
    """A 2 MB block is mmapped under the daemon's malloc settings (its memory goes back when
    freed), comes from the heap while notes are read and embedded (bulk_heap: no fresh zeroed
    pages per embed batch), and is mmapped again after, once the free heap is given back. glibc
    marks a chunk it mmapped with bit 2 of the size word before the block. In a child process:
    the settings are process-wide."""
    script = """
import ctypes
from vaultmem import heap
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def mmapped(n):
    p = libc.malloc(n)
    size = ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value
    libc.free(p)
    return bool(size & 2)
heap.tune_malloc()
before = mmapped(2 << 20)
with heap.bulk_heap():
    bulk = mmapped(2 << 20), mmapped(9 << 20)
heap.return_free_memory()  # as the writer does after big work: the freed heap is not reused
print(before, *bulk, mmapped(2 << 20))
"""
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert got.stdout.split() == ["True", "False", "True", "True"]  # 9 MB: past the bulk threshold
