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

from .errors import DatabaseUnreadable


def connect(path: Path, timeout: float = 10.0) -> sqlite3.Connection:
    """An autocommit connection in WAL mode (readers never wait for the writer), usable from
    any thread (the caller serialises its use). `timeout`: how long a write waits for another
    writer's transaction."""
    try:
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as err:  # WAL needs its side files even to read: a read-only directory fails here
        why = "" if os.access(path.parent, os.W_OK) else f" ({path.parent} is not writable; vaultmem needs to write there)"
        raise DatabaseUnreadable(f"cannot open {path}: {err}{why}", damaged=isinstance(err, sqlite3.DatabaseError)
                                 and any(s in str(err) for s in DAMAGED)) from None
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
