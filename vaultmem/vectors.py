"""The LanceDB vector table: one row per chunk (chunk id, note key, content hash, vector).
LanceDB and pyarrow are imported here and nowhere else.

The embedder's id and dimension are written into the table's schema metadata; opening the table
with another embedder is refused. Vectors are stored as float16 by default (half the disk).

Up to EXACT_MAX_ROWS the search is in memory: a copy of the table's vectors (loaded once,
then kept current by this object's own writes) is multiplied with the query in numpy, with the
filter applied first. Measured on 10,000 chunks: LanceDB's own flat scan took 19-31 ms a query
and 220 ms with a 7,000-key exclusion filter; the in-memory scan takes about 1 ms. Past
COARSE_RERANK rows it scans a coarse copy first and scores its best rows exactly (_Memory): at
50,000 rows 2.0 ms a query against 5.8 ms for the exact scan of every row, the same top 100.

Past EXACT_MAX_ROWS the query goes to LanceDB, with the filter applied before ranking (so a
filtered query still gets every row it should), through an IVF_PQ index once optimize() has
built one. bench/vector_index.py at 100,000 rows (the bench vault's embeddings, perturbed):
LanceDB's flat scan 95 ms a query (numpy 9 ms, but from 195 MB of memory); the index, with
ANN_NPROBES partitions probed and the best ANN_REFINE x k re-ranked on the stored vectors,
20 ms, finding 99% of the exact top 10 (without the re-ranking, 84%). Building it took 277 s
on 2 cores, once; later optimizes add new rows to it, and rows not yet in it are scanned
exactly.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import sys
import threading
import time
import types
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple


class _RunOnFirstUse(types.ModuleType):
    """A package whose own top-level code runs at the first use of a name it defines; its
    submodules import as usual. See _defer_package."""

    _lock = threading.Lock()

    def __getattr__(self, name: str):
        with _RunOnFirstUse._lock:
            if type(self) is _RunOnFirstUse:  # not run yet (or run by another thread meanwhile)
                self.__class__ = types.ModuleType  # type: ignore[assignment]  # back to a plain module
                assert self.__spec__ is not None and self.__spec__.loader is not None
                self.__spec__.loader.exec_module(self)
        return getattr(self, name)


def _defer_package(name: str) -> None:
    """Import package `name` without running its __init__ until one of its names is used.
    LanceDB imports the models of the REST client of Lance namespaces
    (`lance_namespace_urllib3_client.models`) at import, and that package's __init__ imports
    its nine API classes, whose ~370 pydantic-validated methods are compiled there and then:
    1.0-1.4 s of the 1.9-2.6 s that `import lancedb` took here, paid by every process that
    opens the vector table (`vaultmem index`, a daemon start with changes, a query with no
    daemon), for a client only a remote namespace uses. Anything that does use it gets the
    package run in full on first touch, so behaviour is unchanged; nothing is stubbed."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not a package: nothing to defer
    module = _RunOnFirstUse(name)
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    module.__path__, module.__package__ = list(spec.submodule_search_locations), name
    sys.modules[name] = module


_defer_package("lance_namespace_urllib3_client")

import lancedb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from lancedb.index import IvfPq  # noqa: E402

from . import integrity  # noqa: E402
from .errors import EmbedderMismatchError, is_disk_full  # noqa: E402

log = logging.getLogger(__name__)
# Arrow's default pool (jemalloc) keeps freed memory for reuse; the daemon loads the table once
# and then allocates little. With the system pool its RSS is 12-14 MB lower (289-291 against
# 303-304 MB on the 10k bench vault), and nothing measured here got slower.
pa.set_memory_pool(pa.system_memory_pool())
TABLE = "chunks"
EXACT_MAX_ROWS = 100_000  # 100 MB of float16 at 512-d; beyond this, LanceDB and its index
COARSE_DIMS = 128  # the coarse scan's numbers a row (of 512)
COARSE_RERANK = 1_000  # rows scored exactly after the coarse scan, at least
COARSE_SAMPLE = 4_096  # rows the coarse scan's directions are found from
PROJECT_BLOCK = 8_192  # rows converted to float32 at a time while projecting
LOAD_BATCH = 8_192  # rows read from the table at a time into the in-memory copy: 8 MB at 512-d
SCORE_BLOCK = 256  # rows scored at a time: 512 KB of float32 at 512-d
ANN_NPROBES = 20
ANN_REFINE = 10
ANN_DIMS_PER_CODE = 8  # product quantisation: 64 codes at 512-d
MASK_CACHE_SIZE = 8  # filter masks kept: 10 KB each at 10,000 chunks
INDEX_CACHE_BYTES = 16 << 20  # LanceDB's caches: of the ANN index (tables past EXACT_MAX_ROWS)
# Each commit's manifest goes into the metadata cache, and no reader asks for an old one again: a
# daemon filled all it was given, its own memory 18-20 MB bigger after 2,000 single-note edits
# (10,000-note bench: 198 against 180 MB at 2 MB, same warm query, edit and first-index times).
METADATA_CACHE_BYTES = 2 << 20


def padded(n: int) -> int:
    """Rows of the in-memory matrix for `n` vectors: room for a quarter more before it grows."""
    return max(1024, n + n // 4)


def _scores(rows: np.ndarray, idx: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """rows[idx] @ vector in float32, SCORE_BLOCK rows at a time: no temporary reaches the
    daemon's 1 MB mmap threshold (heap.py), where the 2 MB float32 copy of 1,000 rows was a
    fresh mmap, page faults and munmap each query."""
    out = np.empty(idx.size, dtype=np.float32)
    for start in range(0, idx.size, SCORE_BLOCK):
        part = idx[start : start + SCORE_BLOCK]
        out[start : start + part.size] = rows[part].astype(np.float32) @ vector
    return out


def _principal_directions(rows: np.ndarray, n: int, dims: int) -> np.ndarray:
    """(dim, dims) float32: the directions along which the first `n` rows vary most, from an
    evenly spaced sample of COARSE_SAMPLE of them."""
    sample = rows[np.linspace(0, n - 1, min(n, COARSE_SAMPLE)).astype(np.int64)].astype(np.float32)
    sample -= sample.mean(axis=0)
    _, vecs = np.linalg.eigh(sample.T @ sample)  # ascending eigenvalues
    return np.ascontiguousarray(vecs[:, ::-1][:, :dims], dtype=np.float32)


class _View(NamedTuple):
    """What one query reads, fixed when it starts: rows [:n] of `rows` (and of `coarse`) are
    never written again while the view is in use."""

    n: int
    alive: np.ndarray  # bool, n: rows of notes not deleted since the copy was made
    rows_of: dict[str, list[int]]  # note key -> its rows
    rows: np.ndarray  # the vectors as the table stores them (float16 by default)
    coarse: np.ndarray | None  # float32 rows @ basis, the coarse scan's; None while small
    basis: np.ndarray | None


class _Memory:
    """An append-only copy of the table's rows for in-memory scans. Readers take `view()` once
    per query; the writer appends past the readers' end and publishes a new view, so a query
    never sees a half-applied batch (copy-on-write of the small parts, never of the matrix).

    The vectors are kept as the table stores them (float16: half the memory of float32). Past
    COARSE_RERANK rows a query is scored first on `coarse`: each row projected on the
    COARSE_DIMS directions the rows vary most along (a quarter of the 512 numbers), in float32;
    the best COARSE_RERANK (or 8 x the limit) are then scored exactly. On real embeddings
    (bench/coarse_scan.py: each eval set's questions, and 10,000 and 50,000 generated notes)
    that answered 200 queries of each with the exact top 100, in order. The directions are
    found again each time the rows have doubled."""

    def __init__(self, chunks: list[str], notes: list[str], hashes: list[str], rows: np.ndarray):
        """`rows`: the vectors, in the table's dtype, with room to grow past them (`padded`) or not."""
        n = len(chunks)
        self.row_of_hash: dict[str, int] = {h: i for i, h in enumerate(hashes)}
        if len(rows) >= padded(n):
            self.rows = rows
        else:
            self.rows = np.zeros((padded(n), rows.shape[1]), dtype=rows.dtype)
            self.rows[:n] = rows[:n]
        dim = rows.shape[1]
        self.coarse_dims = COARSE_DIMS if dim >= 2 * COARSE_DIMS else 0  # else the exact scan costs as little
        self.coarse: np.ndarray | None = None
        self.basis: np.ndarray | None = None
        self.basis_rows = 0  # rows when the directions were found
        self.chunks, self.notes = list(chunks), list(notes)
        rows_of: dict[str, list[int]] = {}
        for i, key in enumerate(notes):
            rows_of.setdefault(key, []).append(i)
        self._view = _View(n, np.ones(n, dtype=bool), rows_of, self.rows, None, None)
        self._project_if_big()

    def view(self) -> _View:
        return self._view

    def apply(self, delete_notes: set[str], rows: list[tuple[str, str, str, np.ndarray]]) -> None:
        n, alive, rows_of = self._view.n, self._view.alive.copy(), dict(self._view.rows_of)
        for key in delete_notes:
            for i in rows_of.pop(key, ()):
                alive[i] = False
        if rows:
            self.reserve(len(rows))
            new = np.stack([vec for _, _, _, vec in rows])
            self.rows[n : n + len(rows)] = new
            if self.coarse is not None and self.basis is not None:
                self.coarse[n : n + len(rows)] = self.rows[n : n + len(rows)].astype(np.float32) @ self.basis
            for j, (cid, key, digest, _) in enumerate(rows):
                self.row_of_hash[digest] = n + j
                self.chunks.append(cid)
                self.notes.append(key)
                rows_of.setdefault(key, []).append(n + j)
            alive = np.concatenate([alive, np.ones(len(rows), dtype=bool)])
            n += len(rows)
        self._view = _View(n, alive, rows_of, self.rows, self.coarse, self.basis)
        self._project_if_big()

    def reserve(self, rows: int) -> None:
        """Room for `rows` more rows, made now: grown by appends, a matrix is copied each time
        it fills (a quarter more), and the old copy and the new one are both resident for a
        moment; np.zeros takes no memory until a row is written."""
        n = self._view.n
        if len(self.rows) < n + rows:
            grown = np.zeros((padded(n + rows), self.rows.shape[1]), dtype=self.rows.dtype)
            grown[:n] = self.rows[:n]
            self.rows = grown
            if self.coarse is not None:
                coarse = np.zeros((len(grown), self.coarse.shape[1]), dtype=np.float32)
                coarse[:n] = self.coarse[:n]
                self.coarse = coarse

    def _project_if_big(self) -> None:
        """Past COARSE_RERANK rows, (re)find the directions and project every row on them, when
        there are none yet or the rows have doubled since: a new array, so a reader's view keeps
        the pair it started with. 50,000 rows of 512: ~0.1 s."""
        n = self._view.n
        if not self.coarse_dims or n <= COARSE_RERANK or (self.basis is not None and n < 2 * self.basis_rows):
            return
        basis = _principal_directions(self.rows, n, self.coarse_dims)
        coarse = np.zeros((len(self.rows), self.coarse_dims), dtype=np.float32)
        for start in range(0, n, PROJECT_BLOCK):  # a block at a time: no float32 copy of every row
            end = min(n, start + PROJECT_BLOCK)
            coarse[start:end] = self.rows[start:end].astype(np.float32) @ basis
        self.coarse, self.basis, self.basis_rows = coarse, basis, n
        self._view = self._view._replace(coarse=coarse, basis=basis)

    def vector(self, row: int) -> np.ndarray:
        return self.rows[row].astype(np.float32)

    def dead_share(self) -> float:
        n, alive = self._view.n, self._view.alive
        return 1.0 - (alive.sum() / n) if n else 0.0


def _sub_vectors(dim: int) -> int:
    """Codes per vector for the IVF_PQ index: it must divide the dimension (a remote embedder's
    may be 300 or 1000), with at least ANN_DIMS_PER_CODE dimensions to a code."""
    return max((n for n in range(1, dim // ANN_DIMS_PER_CODE + 1) if dim % n == 0), default=1)


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: set[str] | list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in sorted(values))})"


# a data file or manifest lost or cut short: Lance's errors
_LANCE_ERRORS = (RuntimeError, OSError, ValueError, pa.ArrowException)
_reads = integrity.guard_reads("vectors", _LANCE_ERRORS)


class Vectors:
    def __init__(self, directory: Path, embedder_id: str, dim: int, dtype: str = "float16", writable: bool = True):
        """Open the table in `directory`, made when missing if `writable`; a reader finds no
        table as an empty one (`table` None), which the integrity check holds against the
        catalog. A table that cannot be opened raises IndexDamagedError."""
        if writable:
            directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.damaged: str | None = None  # why its answers cannot be trusted (integrity.py), once found
        self.retired = False  # made anew by VaultIndex.repair: its files are gone (integrity.guard_reads)
        # bounded caches: with the defaults, every commit's metadata stayed cached and the daemon
        # grew by ~135 MB over 300 single-note edits
        session = lancedb.Session(index_cache_size_bytes=INDEX_CACHE_BYTES,
                                  metadata_cache_size_bytes=METADATA_CACHE_BYTES)
        self.db = lancedb.connect(str(directory), session=session)
        self.dim = dim
        self.np_dtype = np.float16 if dtype == "float16" else np.float32
        pa_type = pa.float16() if dtype == "float16" else pa.float32()
        self.schema = pa.schema(
            [
                pa.field("chunk", pa.string()),
                pa.field("note", pa.string()),
                pa.field("hash", pa.string()),
                pa.field("vector", pa.list_(pa_type, dim)),
            ],
            metadata={"embedder": embedder_id, "dim": str(dim), "dtype": dtype},
        )
        self.table: Any = None  # lancedb.Table, whose type hints lag its API
        made = directory / f"{TABLE}.lance"
        try:
            exists = directory.is_dir() and TABLE in self.db.list_tables().tables
            if exists and writable and not integrity.table_versions(made):
                # its making was cut short (a full disk, a kill) before its first version: it
                # holds nothing, and is made anew below (opened, it reads as damage)
                shutil.rmtree(made, ignore_errors=True)
                exists = False
            if exists:
                self.table = self.db.open_table(TABLE)
        except _LANCE_ERRORS as err:
            raise integrity.unreadable(directory.parent, "vectors", err) from err
        if self.table is not None:
            meta = {k.decode(): v.decode() for k, v in (self.table.schema.metadata or {}).items()}
            if meta.get("embedder") != embedder_id or meta.get("dim") != str(dim):
                raise EmbedderMismatchError(
                    f"the vector index was built with embedder {meta.get('embedder')} "
                    f"({meta.get('dim')}-d), but {embedder_id} ({dim}-d) is configured; "
                    f"run `vaultmem index --rebuild` to re-embed every note"
                )
        elif writable:
            try:
                self._make()
            except Exception as err:  # a full disk: read as empty meanwhile, made at its first write
                if not is_disk_full(err):
                    raise
                log.warning("the vector table is made at its first write: %s", err)
        self._memory: _Memory | None = None
        self._memory_lock = threading.Lock()
        self.expected_rows = 0  # rows known to be coming (expect)
        self._mask_cache: list[tuple] = []  # (view, allow, deny, mask), newest last

    def _make(self) -> None:
        """Make the (empty) table; what was made of it on a failure (a full disk) is removed, so
        that it is not read as damage."""
        try:
            self.table = self.db.create_table(TABLE, schema=self.schema)
        except BaseException:
            shutil.rmtree(self.directory / f"{TABLE}.lance", ignore_errors=True)
            raise

    @_reads
    def count(self) -> int:
        return self.table.count_rows() if self.table is not None else 0

    @_reads
    def vectors_for_hashes(self, hashes: set[str]) -> dict[str, np.ndarray]:
        """Stored vectors by content hash, so unchanged text is never embedded twice."""
        if not hashes or self.table is None:
            return {}
        if self._memory is not None:  # rows of deleted notes stay in memory too: still valid vectors
            memory = self._memory
            return {h: memory.vector(memory.row_of_hash[h]) for h in hashes if h in memory.row_of_hash}
        got = (
            self.table.search()
            .where(in_list("hash", hashes))
            .select(["hash", "vector"])
            .limit(len(hashes) * 4 + 16)
            .to_arrow()
        )
        out: dict[str, np.ndarray] = {}
        for h, v in zip(got["hash"].to_pylist(), got["vector"].to_numpy(zero_copy_only=False)):
            out[h] = np.asarray(v, dtype=np.float32)
        return out

    def replace(self, delete_notes: set[str], rows: list[tuple[str, str, str, np.ndarray]]) -> None:
        """Remove every chunk of `delete_notes`, then add `rows` (chunk, note, hash, vector)."""
        if self.table is None:  # not made yet (a full disk when it was opened): nothing to remove
            if not rows:
                return
            self._make()
        elif delete_notes:
            self.table.delete(in_list("note", delete_notes))
        if rows:
            mat = np.stack([r[3] for r in rows]).astype(self.np_dtype)
            flat = pa.array(mat.ravel())
            batch = pa.table(
                {
                    "chunk": [r[0] for r in rows],
                    "note": [r[1] for r in rows],
                    "hash": [r[2] for r in rows],
                    "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
                },
                schema=self.schema,
            )
            self.table.add(batch)
        with self._memory_lock:
            if self._memory is not None:
                self._memory.apply(delete_notes, rows)
                if self._memory.dead_share() > 0.5:
                    self._memory = None  # mostly tombstones: reload on next search

    @_reads
    def _memory_view(self):
        with self._memory_lock:
            if self._memory is None:
                # read LOAD_BATCH rows at a time, each copied straight into the padded matrix: a
                # copy of the whole column first, then a float32 one, then the padded one took a
                # 50k note daemon's start to a 583 MB peak; the whole table read at once, 64 MB
                # above what it keeps
                count = self.count()
                matrix = np.zeros((padded(count + self.expected_rows), self.dim), dtype=self.np_dtype)
                chunks, notes, hashes = [], [], []  # of str, in the matrix's order
                batches = (self.table.search().select(["chunk", "note", "hash", "vector"]).to_batches(LOAD_BATCH)
                           if self.table is not None else ())
                for batch in batches:
                    rows = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, self.dim)
                    row = len(chunks)
                    if row + len(rows) > len(matrix):  # rows added since they were counted
                        grown = np.zeros((padded(row + len(rows) + self.expected_rows), self.dim), dtype=self.np_dtype)
                        grown[:row] = matrix[:row]
                        matrix = grown
                    matrix[row : row + len(rows)] = rows
                    chunks += batch.column("chunk").to_pylist()
                    notes += batch.column("note").to_pylist()
                    hashes += batch.column("hash").to_pylist()
                self._memory = _Memory(chunks, notes, hashes, matrix)
            return self._memory, self._memory.view()

    @_reads
    def search(self, vector: np.ndarray, limit: int, allow: set[str] | None = None,
               deny: set[str] | None = None) -> list[tuple[str, str, float]]:
        """(chunk id, note key, cosine similarity), best first; filter first, scores exact."""
        if allow is not None and not allow:
            return []
        if self._memory is not None or self.count() <= EXACT_MAX_ROWS:
            return self._search_memory(np.asarray(vector, dtype=np.float32), limit, allow, deny)
        q = self.table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
        q = q.nprobes(ANN_NPROBES).refine_factor(ANN_REFINE)  # no effect until an index exists
        where = []
        if allow is not None:
            where.append(in_list("note", allow))
        if deny:
            where.append("NOT (" + in_list("note", deny) + ")")
        if where:
            q = q.where(" AND ".join(where), prefilter=True)
        got = q.select(["chunk", "note", "_distance"]).limit(limit).to_arrow()
        return [
            (c, n, 1.0 - float(d))
            for c, n, d in zip(got["chunk"].to_pylist(), got["note"].to_pylist(), got["_distance"].to_pylist())
        ]

    def _search_memory(self, vector: np.ndarray, limit: int, allow: set[str] | None,
                       deny: set[str] | None) -> list[tuple[str, str, float]]:
        memory, view = self._memory_view()
        n, alive, rows_of = view.n, view.alive, view.rows_of
        if n == 0:
            return []
        # same rows, same filter sets (the searcher reuses a set until the notes change): the
        # masks of the last few are kept, so that queries alternating between filters reuse them
        mask = next((m for v, a, d, m in self._mask_cache if v is view and a is allow and d is deny), None)
        if mask is None:
            if allow is not None:
                mask = np.zeros(n, dtype=bool)
                for key in allow:
                    mask[rows_of.get(key, [])] = True
            else:
                mask = alive.copy()
                for key in deny or ():
                    mask[rows_of.get(key, [])] = False
            kept = [c for c in self._mask_cache if c[0] is view][-(MASK_CACHE_SIZE - 1):]  # a write made a new view
            self._mask_cache = kept + [(view, allow, deny, mask)]
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            return []
        want = max(COARSE_RERANK, 8 * limit)
        if view.coarse is not None and view.basis is not None and idx.size > want:
            # the coarse scan keeps the `want` likeliest rows; they are scored exactly below. Every
            # row's projection is multiplied, then the allowed ones taken: a gather of the allowed
            # ones first (1.5 MB at 10,000 rows) was a fresh mmap each query, and no faster
            approx = (view.coarse[:n] @ (vector @ view.basis))[idx]
            idx = idx[np.argpartition(-approx, want - 1)[:want]]
        scores = _scores(view.rows, idx, vector)
        k = min(limit, idx.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < idx.size else np.arange(idx.size)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(memory.chunks[idx[t]], memory.notes[idx[t]], float(scores[t])) for t in top]

    @_reads
    def note_vectors(self, keys: list[str]) -> tuple[list[str], np.ndarray]:
        """One unit vector per note (the normalised mean of its chunks), for the notes among
        `keys` that have any; used to find near-duplicate notes."""
        _, view = self._memory_view()
        have = [k for k in keys if view.rows_of.get(k)]
        out = np.zeros((len(have), self.dim), dtype=np.float32)
        for i, key in enumerate(have):
            out[i] = view.rows[view.rows_of[key]].astype(np.float32).mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return have, out / np.where(norms > 0, norms, 1.0)

    def optimize(self) -> None:
        """Compact fragments and drop old versions (deletes leave both behind), and past
        EXACT_MAX_ROWS build the ANN index if there is none (compaction adds new rows to it)."""
        with warnings.catch_warnings():
            # we are the table's only writer; other processes open it afresh for each query
            warnings.simplefilter("ignore", UserWarning)
            if self.table is None:  # not made yet: nothing to compact
                return
            self.table.optimize(cleanup_older_than=timedelta(seconds=0))
            rows = self.count()
            if rows > EXACT_MAX_ROWS and not self.has_index():
                log.info("building the vector index over %d rows (once; minutes on a laptop)", rows)
                t = time.perf_counter()
                self.table.create_index("vector", config=IvfPq(
                    distance_type="cosine", num_partitions=max(1, int(rows ** 0.5)),
                    num_sub_vectors=_sub_vectors(self.dim)))
                log.info("built the vector index in %.0f s", time.perf_counter() - t)

    @_reads
    def cosines(self, vector: np.ndarray, chunk_ids: list[str]) -> dict[str, float]:
        """The cosine of each of the chunks with the (unit) query vector; a chunk the table does
        not hold is left out. Each the same whatever other chunks are asked with it: BLAS's
        matrix-vector product sums a row in an order that depends on the rows beside it (a hit's
        relevance moved in its fourth decimal with the other hits), einsum's does not."""
        memory, view = self._memory_view()
        rows = [(cid, r) for cid in chunk_ids for r in view.rows_of.get(cid.rsplit("#", 1)[0], ())
                if r < view.n and view.alive[r] and memory.chunks[r] == cid]
        if not rows:
            return {}
        idx = np.array([r for _, r in rows], dtype=np.int64)
        scores = np.einsum("ij,j->i", view.rows[idx].astype(np.float32), np.asarray(vector, dtype=np.float32))
        return {cid: float(x) for (cid, _), x in zip(rows, scores)}

    @_reads
    def find_chunks(self, ids: list[str]) -> set[str]:
        """Those of the chunk ids the table holds with a vector, read back from its data files
        (a check that it holds what the catalog says: integrity.py)."""
        if not ids or self.table is None:
            return set()
        got = self.table.search().where(in_list("chunk", set(ids))).select(["chunk", "vector"]).limit(
            2 * len(ids)).to_arrow()
        return {c for c, v in zip(got["chunk"].to_pylist(), got["vector"].to_pylist()) if v is not None}

    def expect(self, rows: int) -> None:
        """`rows` more rows are coming (the vectors a first index left for later): the in-memory
        copy makes room for them at once, now or when it is made. A 50,000-note daemon grew it
        ~15 times while filling, and its first index peaked ~115 MB higher for it."""
        self.expected_rows = rows
        with self._memory_lock:
            if self._memory is not None:
                self._memory.reserve(rows)

    def refresh(self) -> None:
        """See what another process or object has committed to the table since."""
        if self.table is not None:
            self.table.checkout_latest()

    def has_index(self) -> bool:
        return self.table is not None and any("vector" in idx.columns for idx in self.table.list_indices())
