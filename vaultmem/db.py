"""SQLite as vaultmem's own state uses it (the catalog and the usage records): one way to open a
database, and one way to change it atomically. Nothing here knows a table.

Connections autocommit each statement. A change of several statements goes in `transaction`,
so that a reader in another thread or process sees all of it or none of it: in autocommit mode
Python's `with connection:` opens no transaction, and every statement inside it is committed
(and seen) on its own.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import DatabaseUnreadable, DiskFullError


def connect(path: Path, timeout: float = 10.0, read_when_full: bool = False) -> sqlite3.Connection:
    """An autocommit connection in WAL mode (readers never wait for the writer), usable from
    any thread (the caller serialises its use). `timeout`: how long a write waits for another
    writer's transaction. On a full disk (WAL needs its side files made even to read) a
    writer's open raises DiskFullError; with `read_when_full` the database is opened read-only
    as it is on disk (ReadOnlyFullDisk), so that queries still answer."""
    try:
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as err:  # a read-only directory fails here too
        if no_room(path.parent):
            if read_when_full and path.is_file():
                return _read_only(path)
            raise DiskFullError(f"no space left on the disk of {path.parent}: free some space and run it again") from None
        why = "" if os.access(path.parent, os.W_OK) else f" ({path.parent} is not writable; vaultmem needs to write there)"
        raise DatabaseUnreadable(f"cannot open {path}: {err}{why}", damaged=isinstance(err, sqlite3.DatabaseError)
                                 and any(s in str(err) for s in DAMAGED)) from None
    return db


NO_ROOM_BYTES = 32 << 20


def no_room(path: Path) -> bool:
    """Whether the disk where `path` is is full: under NO_ROOM_BYTES free, or under a twentieth of
    it on a small one (a 4 MB tmpfs is not full with 3.9 MB free); a read-only one is not full.
    A full disk does not always say so: SQLite reports "disk I/O error" when it cannot make a
    side file, and once Tantivy's writer thread hits the I/O error every later write fails with
    "An index writer was killed"."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    if st.f_flag & os.ST_RDONLY:
        return False
    return st.f_bavail * st.f_frsize < min(NO_ROOM_BYTES, st.f_blocks * st.f_frsize // 20)


class ReadOnlyFullDisk(sqlite3.Connection):
    """A database opened read-only, as it is on disk, because the disk is full; a write raises
    DiskFullError, which says so (SQLite would say "attempt to write a readonly database")."""

    path: Path

    def _full(self) -> DiskFullError:
        return DiskFullError(f"no space left on the disk of {self.path.parent}: nothing can be written there; "
                             "free some space and run it again")

    def execute(self, *args, **kwargs):
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.OperationalError as err:
            if "readonly" in str(err):
                raise self._full() from None
            raise

    def executemany(self, *args, **kwargs):
        try:
            return super().executemany(*args, **kwargs)
        except sqlite3.OperationalError as err:
            if "readonly" in str(err):
                raise self._full() from None
            raise


def _read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False,
                         isolation_level=None, factory=ReadOnlyFullDisk)
    db.path = path
    db.row_factory = sqlite3.Row
    return db


DAMAGED = ("file is not a database", "database disk image is malformed")  # SQLite's words for it


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """Commit everything done inside at once, or nothing if it raises. Inside another
    transaction it is part of that one."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN IMMEDIATE")  # take the write lock now, not at the first write
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # also when COMMIT itself fails (a full disk): left open, the transaction would swallow
        # every later change, each taken for "inside another transaction" and never committed
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
