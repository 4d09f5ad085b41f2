"""Whether the index still holds what its catalog says: the catalog's own pages, and each
engine's documents against the catalog's chunks (counts, and a sample of chunk ids read back).
The index is derived data; a part that fails here is made again from the notes (VaultIndex
repairs, a reader says what to run), never trusted as it is. Nothing here writes.

What it catches, each found by hand with the daemon stopped (issue 44): a catalog page of
garbage (SQLite reads it only when a query reaches it), Tantivy's meta.json gone (Tantivy then
opens an empty index without a word), a segment file damaged (an error or a Rust panic on the
first read), a Lance data file gone or cut short, its latest manifest gone (Lance then opens an
older version), its directory gone (an empty table was made in its place).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import EmbedderMismatchError, IndexDamagedError, IndexRemadeError, VaultmemError

if TYPE_CHECKING:
    from .index import VaultIndex

log = logging.getLogger(__name__)

SAMPLE_CHUNKS = 32  # chunk ids read back from each engine on open


def catalog_problem(db: sqlite3.Connection) -> str | None:
    """What SQLite's quick check finds wrong with the catalog's pages, or None (10,000 notes:
    see the README's figures)."""
    try:
        rows = [r[0] for r in db.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as err:
        return str(err)
    return None if rows == ["ok"] else "; ".join(rows)


def table_versions(table: Path) -> list[tuple[str, int]]:
    """(name, size) of each version (manifest) of a LanceDB table's directory, sorted; none
    when it has none (not there, or its making cut short before its first version)."""
    try:
        return sorted((e.name, e.stat().st_size) for e in os.scandir(table / "_versions") if e.name.endswith(".manifest"))
    except OSError:
        return []


def vector_files(directory: Path) -> str:
    """What the vector table's files are now (its manifests' names and sizes, its data files'
    count and bytes), as a digest, without opening LanceDB (0.5 s to import): kept in the
    catalog after each write of the table, so that a check finds a manifest or data file gone
    or cut short at the cost of two directory listings, and opens the table only then. ""
    when there is no table."""
    table = directory / "chunks.lance"
    manifests = table_versions(table)
    if not manifests:
        return ""
    try:
        data = [e.stat().st_size for e in os.scandir(table / "data") if e.name.endswith(".lance")]
    except OSError:
        return ""
    return hashlib.blake2b(repr((manifests, len(data), sum(data))).encode(), digest_size=12).hexdigest()


def say_unreadable(state_dir: Path, part: str, why: str) -> None:
    """Leave word in the state dir that a read of an engine failed (a damage the sampled check
    missed: a field's postings read only by some queries), so that the next writer's check
    makes that engine again. Best effort: a reader that cannot write still says the error."""
    try:
        (state_dir / f"{part}.unreadable").write_text(why[:500] + "\n", encoding="utf-8")
    except OSError:
        pass


def unreadable(state_dir: Path, part: str, err: BaseException) -> IndexDamagedError:
    """The one-line error for an engine that failed to read (its first line of cause, and what
    to run), with word left for the next writer (say_unreadable)."""
    first = (str(err).splitlines() or [type(err).__name__])[0][:200]
    say_unreadable(state_dir, part, first)
    return IndexDamagedError(damaged(state_dir, part, f"cannot be read ({first})"))


def guard_reads(part: str, catch: tuple[type[BaseException], ...]):
    """Decorate an engine's read methods: an engine found wanting (its `damaged`) refuses to
    answer, and an error of the engine's (`catch`: a damaged file, or for Tantivy a Rust panic,
    which Python sees as a BaseException) becomes `unreadable`, unless the engine was `retired`
    (VaultIndex.repair made its part anew and removed its files while another thread still held
    it: the daemon's warm-up, a query). The engine has `directory` (its own, in the state dir),
    `damaged` and `retired`."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            if self.damaged:  # found by engine_problems: its answers would not be the notes'
                raise IndexDamagedError(self.damaged)
            try:
                return method(self, *args, **kwargs)
            except (KeyboardInterrupt, SystemExit, GeneratorExit, VaultmemError):
                raise
            except catch as err:
                if self.retired:  # its files were removed on purpose: no damage to leave word of
                    raise IndexRemadeError(f"the {PART[part]} was made anew while this read ran: ask again") from err
                raise unreadable(self.directory.parent, part, err) from err
        return wrapper
    return decorate


def _said_unreadable(state_dir: Path, part: str) -> str | None:
    try:
        return (state_dir / f"{part}.unreadable").read_text(encoding="utf-8").strip() or "?"
    except OSError:
        return None


def forget_unreadable(state_dir: Path, part: str) -> None:
    (state_dir / f"{part}.unreadable").unlink(missing_ok=True)


def _sample(idx: "VaultIndex", n: int) -> list[str]:
    """Up to `n` chunk ids of notes not pending, spread over the table (by rowid), plus the
    first and the last."""
    db = idx.catalog.db
    top = db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0] or 0
    if not top:
        return []
    rng = random.Random(top)  # the same sample for the same table: a check is repeatable
    rowids = sorted({1, top, *(rng.randint(1, top) for _ in range(n))})
    marks = ",".join("?" * len(rowids))
    return [r[0] for r in db.execute(
        f"SELECT id FROM chunks WHERE rowid IN ({marks}) AND note NOT IN (SELECT key FROM pending)", rowids)]


ENGINES = ("fulltext", "vectors")
PART = {"fulltext": "full-text index", "vectors": "vector index", "catalog": "catalog"}
MEANWHILE = {"fulltext": "--mode vector", "vectors": "--mode text"}


def damaged(state_dir, part: str, why: str) -> str:
    """What a reader says of an engine `engine_problems` found wanting."""
    return (f"the {PART[part]} in {state_dir} {why}; `vaultmem index` makes it again from the notes "
            f"({MEANWHILE[part]} answers meanwhile)")


def engine_problems(idx: "VaultIndex", sample: int = SAMPLE_CHUNKS, parts: tuple[str, ...] = ENGINES) -> dict[str, str]:
    """{"fulltext" | "vectors": why} for each engine that does not hold the catalog's chunks:
    its count differs (checked only when no note is pending: an interrupted write leaves the
    engines ahead of the catalog until the next sync redoes those notes), a sampled chunk is
    not in it, or it cannot be read at all."""
    t = time.perf_counter()
    want = idx.catalog.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    # the notes still without vectors (written for the background to embed) have none at all
    unembedded = idx.catalog.unembedded_set()
    want_vectors = want - (idx.catalog.unembedded_chunks() if unembedded else 0)
    pending = idx.catalog.db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
    ids = _sample(idx, sample) if sample else []
    out: dict[str, str] = {}
    for name, engine in (("fulltext", lambda: idx.fulltext), ("vectors", lambda: idx.vectors)):
        if name not in parts:
            continue
        if said := _said_unreadable(idx.state_dir, name):
            out[name] = f"could not be read by a query ({said})"
            continue
        if name == "vectors" and not idx.vectors_open:
            files = vector_files(idx.state_dir / "lance")
            if (idx.catalog.get_meta("vector_files") or "-") == files:
                continue  # the files are as this index last wrote them
            if not files and not want_vectors:
                continue  # no table, and none wanted yet (a first index, its vectors left for later)
        try:
            e = engine()
            have, should = e.count(), want_vectors if name == "vectors" else want
            if not pending and have != should:
                out[name] = f"holds {have:,} chunks where the catalog lists {should:,}"
                continue
            asked = [i for i in ids if i.rsplit("#", 1)[0] not in unembedded] if name == "vectors" else ids
            missing = sorted(set(asked) - e.find_chunks(asked))
            if missing:
                out[name] = f"lacks {len(missing)} of {len(asked)} chunks sampled from the catalog (e.g. {missing[0]})"
        except EmbedderMismatchError:
            raise  # not damage: the settings name another model (exit 4, said as it is)
        except VaultmemError as err:
            cause = err.__cause__ or err
            out[name] = f"cannot be read ({(str(cause).splitlines() or [type(cause).__name__])[0][:200]})"
    log.debug("integrity check of %s: %d chunks, %d sampled, %.1f ms", idx.state_dir, want, len(ids),
              (time.perf_counter() - t) * 1000)
    return out
