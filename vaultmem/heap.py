"""The daemon's own memory: glibc's malloc tuned for a long-lived process with a thread per
client, the heap kept for big blocks while the writer reads and embeds notes, and the free heap
given back after big work. Process-wide settings through the C library; nothing here knows an
index. Where glibc is not there (another libc, another platform) every call does nothing.
"""

from __future__ import annotations

import contextlib
import functools


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
# free heap above the top this big goes back at once. At glibc's default (128 KB) a warm query
# gave back and took again the few hundred KB it frees and allocates, ~15 brk calls and their
# page faults a query: at 4 MB, 50,000 notes in process, median 16.1/15.6 -> 15.2/14.6 ms.
TRIM_THRESHOLD = 4 << 20

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


def tune_malloc() -> None:
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


def return_free_memory() -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


# Big work (a first index, a folder of notes added) leaves freed heap resident that the daemon
# no longer needs. It is given back after this many chunks embedded, or a reconcile that
# changed over 100 notes: 295 -> 280 MB at the end of a first index of the 10,000-note bench
# vault, and 30-45 MB each 500 single-note edits. (The model's word table gives back its own
# pages after every embed call: UseEmbedder._release_pages.)
RELEASE_AFTER_CHUNKS = 500


def rss_mb() -> float:
    """This process's resident set in MB (0 where /proc is not there)."""
    try:
        with open("/proc/self/status") as f:
            return next((int(ln.split()[1]) / 1024 for ln in f if ln.startswith("VmRSS:")), 0.0)
    except OSError:
        return 0.0
