"""How notes are used, in vaultmem's own state (`usage.sqlite3`), never in the notes: how often
and when each note was retrieved, feedback and the per-note weight it moves, per-task
attribution, and retirements (`vaultmem forget --retire`).

It is a separate database from the catalog on purpose: the catalog is derived from the files and
may be rebuilt from scratch at any time; these records are not derivable and survive a rebuild.
Keys are note keys (`vault:path`). Thread-safe: one connection behind a lock.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable

from . import private
from .db import ReadOnlyFullDisk, connect, transaction
from .errors import DatabaseUnreadable, DiskFullError

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS retrievals (note TEXT PRIMARY KEY, count INTEGER NOT NULL, last_ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS attribution (
    note TEXT NOT NULL, task TEXT NOT NULL, retrieved INTEGER NOT NULL, best_score REAL,
    best_rank INTEGER, first_ts REAL NOT NULL, last_ts REAL NOT NULL, credit REAL,
    PRIMARY KEY (note, task)
);
CREATE TABLE IF NOT EXISTS feedback (
    note TEXT PRIMARY KEY, weight REAL NOT NULL, useful INTEGER NOT NULL, useless INTEGER NOT NULL,
    last_ts REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS feedback_log (ts REAL NOT NULL, note TEXT NOT NULL, task TEXT, useful INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS retired (note TEXT PRIMARY KEY, ts REAL NOT NULL, reason TEXT);
"""

_NOTE_TABLES = ("retrievals", "attribution", "feedback", "feedback_log", "retired")
NEUTRAL = 0.5  # the feedback weight of a note nobody has judged


class Usage:
    def __init__(self, state_dir: Path):
        private.restrict_umask()
        private.own_dir(state_dir, "the state directory")
        path = state_dir / "usage.sqlite3"
        self.full: str | None = None  # why nothing can be kept (a full disk)
        try:
            self.db = connect(path, read_when_full=True)
            self.db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except DiskFullError as err:  # no records yet, and no room to start them: kept in memory
            log.info("%s; this process keeps what it would record in memory only", err)
            self.db = connect(Path(":memory:"))
            self.full = str(err)
        except (DatabaseUnreadable, sqlite3.DatabaseError) as err:
            if isinstance(err, DatabaseUnreadable) and not err.damaged:
                raise
            # these records are not derivable from the notes: the damaged file is kept, renamed,
            # for `sqlite3 FILE .recover`, and the records start afresh, so that every query does
            # not fail on them (a daemon that cannot start serves nobody)
            aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            os.replace(path, aside)
            for side in ("-wal", "-shm"):
                Path(f"{path}{side}").unlink(missing_ok=True)
            log.warning("the usage records %s are damaged (%s): kept as %s (`sqlite3 %s .recover` may save them); "
                        "retrievals, feedback and retirements start afresh", path, str(err).rsplit(": ", 1)[-1],
                        aside.name, aside)
            self.db = connect(path)
        self.lock = threading.Lock()
        self._retired: tuple[tuple[int, int], dict[str, float]] | None = None
        self._own_changes = 0
        self._record_failed = False
        with self.lock:
            try:
                self._start()
            except (DiskFullError, sqlite3.OperationalError) as err:
                if not isinstance(self.db, ReadOnlyFullDisk):
                    raise
                self.full = self.db._full().args[0]
                if isinstance(err, sqlite3.OperationalError):  # made but never written: nothing to read
                    self.db = connect(Path(":memory:"))
                    self._start()
                # else read as it is on the full disk: answers go on, records wait

    def _start(self) -> None:
        self.db.executescript(SCHEMA)
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('started', ?)", (str(time.time()),))

    def _can_write(self) -> None:
        """Feedback, retirements and moves are kept or refused, never taken and lost: on a full
        disk (records read as they are, or kept in memory) they are refused."""
        if self.full:
            raise DiskFullError(self.full)

    def close(self) -> None:
        with self.lock:
            self.db.close()

    @property
    def started(self) -> float:
        """When this state directory began keeping usage records."""
        with self.lock:
            return float(self.db.execute("SELECT v FROM meta WHERE k='started'").fetchone()[0])

    # -------------------------------------------------------------- retrievals

    def record(self, hits: list[tuple[str, float]], task: str | None = None) -> None:
        """One query's hits, best first, as (note key, score). Counting is not what the query
        was for: when the records cannot be written (a full disk, a locked database), the query
        is still answered, and the first such failure is logged until a record succeeds."""
        if not hits:
            return
        try:
            self._record(hits, task)
        except (sqlite3.Error, DiskFullError) as err:
            if not self._record_failed:
                log.warning("could not record which notes a query returned (%s); queries are answered "
                            "anyway", err)
            self._record_failed = True
        else:
            self._record_failed = False

    def _record(self, hits: list[tuple[str, float]], task: str | None) -> None:
        now = time.time()
        with self.lock, transaction(self.db):
            self.db.executemany(
                "INSERT INTO retrievals VALUES (?, 1, ?) ON CONFLICT(note) DO UPDATE SET "
                "count = count + 1, last_ts = excluded.last_ts", [(key, now) for key, _ in hits])
            if task:
                self.db.executemany(
                    "INSERT INTO attribution VALUES (?, ?, 1, ?, ?, ?, ?, NULL) ON CONFLICT(note, task) DO UPDATE SET "
                    "retrieved = retrieved + 1, best_score = max(coalesce(best_score, 0), excluded.best_score), "
                    "best_rank = min(coalesce(best_rank, excluded.best_rank), excluded.best_rank), "
                    "last_ts = excluded.last_ts",
                    [(key, task, score, rank, now, now) for rank, (key, score) in enumerate(hits, 1)])

    def retrievals(self, keys: Iterable[str] | None = None) -> dict[str, tuple[int, float]]:
        """note key -> (times returned, last returned at)."""
        with self.lock:
            rows = self.db.execute("SELECT note, count, last_ts FROM retrievals").fetchall()
        wanted = set(keys) if keys is not None else None
        return {r[0]: (r[1], r[2]) for r in rows if wanted is None or r[0] in wanted}

    def attribution(self, task: str | None = None) -> list[dict]:
        """(note, task, retrieved, best_score, best_rank, credit) rows; credit is the sum of
        feedback given for that note on that task (+1 useful, -1 useless), None if none."""
        sql = ("SELECT * FROM attribution" + (" WHERE task=?" if task else "")
               + " ORDER BY task, best_rank IS NULL, best_rank, note")
        with self.lock:
            return [dict(r) for r in self.db.execute(sql, (task,) if task else ())]

    # -------------------------------------------------------------- feedback

    def feedback(self, key: str, useful: bool, alpha: float, task: str | None = None) -> float:
        """Move the note's weight toward 1 (useful) or 0 (useless) by an exponential moving
        average with factor `alpha`; return the new weight."""
        self._can_write()
        now = time.time()
        target = 1.0 if useful else 0.0
        with self.lock, transaction(self.db):
            row = self.db.execute("SELECT weight FROM feedback WHERE note=?", (key,)).fetchone()
            weight = (row[0] if row else NEUTRAL) + alpha * (target - (row[0] if row else NEUTRAL))
            self.db.execute(
                "INSERT INTO feedback VALUES (?, ?, ?, ?, ?) ON CONFLICT(note) DO UPDATE SET weight=excluded.weight, "
                "useful = useful + excluded.useful, useless = useless + excluded.useless, last_ts = excluded.last_ts",
                (key, weight, int(useful), int(not useful), now))
            self.db.execute("INSERT INTO feedback_log VALUES (?, ?, ?, ?)", (now, key, task, int(useful)))
            if task:
                self.db.execute(
                    "INSERT INTO attribution VALUES (?, ?, 0, NULL, NULL, ?, ?, ?) ON CONFLICT(note, task) DO UPDATE SET "
                    "credit = coalesce(credit, 0) + excluded.credit",
                    (key, task, now, now, 1.0 if useful else -1.0))
        return weight

    def weights(self, keys: Iterable[str]) -> dict[str, float]:
        """Feedback weights of the given notes that have any (others are NEUTRAL)."""
        keys = list(keys)
        out: dict[str, float] = {}
        with self.lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                out.update(self.db.execute(
                    f"SELECT note, weight FROM feedback WHERE note IN ({','.join('?' * len(part))})", part).fetchall())
        return out

    def feedback_counts(self) -> dict[str, tuple[float, int, int]]:
        with self.lock:
            return {r[0]: (r[1], r[2], r[3]) for r in self.db.execute("SELECT note, weight, useful, useless FROM feedback")}

    def follow(self, moved: dict[str, str]) -> int:
        """Carry every record of a note that moved (old key -> new key) to its new key, so that
        renaming or filing a note keeps its retrievals, feedback and retirement. Records left at
        the new key by an earlier note of that path are replaced. Returns the notes carried."""
        self._can_write()
        carried = 0
        with self.lock, transaction(self.db):
            for old, new in moved.items():
                found = False
                for table in _NOTE_TABLES:
                    if self.db.execute(f"SELECT 1 FROM {table} WHERE note=? LIMIT 1", (old,)).fetchone():
                        self.db.execute(f"DELETE FROM {table} WHERE note=?", (new,))
                        self.db.execute(f"UPDATE {table} SET note=? WHERE note=?", (new, old))
                        found = True
                carried += found
            self._own_changes += 1
        return carried

    # -------------------------------------------------------------- retirements

    def retire(self, keys: Iterable[str], reason: str = "") -> list[str]:
        """Record the notes as retired (not current); return those newly retired."""
        self._can_write()
        now = time.time()
        with self.lock, transaction(self.db):
            new = [k for k in keys if not self.db.execute("SELECT 1 FROM retired WHERE note=?", (k,)).fetchone()]
            self.db.executemany("INSERT INTO retired VALUES (?, ?, ?)", [(k, now, reason) for k in new])
            self._own_changes += 1
        return new

    def restore(self, keys: Iterable[str]) -> list[str]:
        """Undo retirements; return the notes that were retired."""
        self._can_write()
        with self.lock, transaction(self.db):
            was = [k for k in keys if self.db.execute("SELECT 1 FROM retired WHERE note=?", (k,)).fetchone()]
            self.db.executemany("DELETE FROM retired WHERE note=?", [(k,) for k in was])
            self._own_changes += 1
        return was

    def retired(self) -> dict[str, float]:
        """note key -> when it was retired. The same object until the records change."""
        with self.lock:
            version = (self.db.execute("PRAGMA data_version").fetchone()[0], self._own_changes)
            if self._retired is None or self._retired[0] != version:
                self._retired = (version, dict(self.db.execute("SELECT note, ts FROM retired").fetchall()))
            return self._retired[1]
