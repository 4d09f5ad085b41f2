"""The catalog: vaultmem's own record of every note file it has seen, in SQLite (stdlib).

It holds what the engines do not: each file's stat and content hash (for incremental sync),
the normalised frontmatter, chunk headings, line ranges and text (for hits and snippets), the
derived supersession state, skipped files with their reasons, and a `pending` list that makes
writes crash-safe (a note is marked pending before the engines change and cleared after, so a
restart redoes exactly the interrupted notes). It never touches the notes themselves.

About 600 lines: the schema and its migrations, the records the read side gets, and every
query on them, so that the read side sees neither SQL nor JSON (integrity.py's checks alone
read the tables themselves).
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from collections.abc import Set
from typing import Any, Iterable, NamedTuple

from .config import Vault
from .db import connect, transaction
from .errors import IndexMissingError
from .notes import Note, date_source
from .supersession import Facts, Scopes, compute, path_candidates, topic_key

log = logging.getLogger(__name__)

# when a note was written, as written_at tells it (its date, else its file's mtime), in SQL
WRITTEN = "coalesce(date_ts, mtime_ns / 1e9, 0)"

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS vaults (name TEXT PRIMARY KEY, root TEXT NOT NULL);
-- a preview that begins the note's first chunk is not kept twice: preview is NULL, and
-- preview_chars says how many characters of that chunk's text it is (catalog.preview)
CREATE TABLE IF NOT EXISTS notes (
    key TEXT PRIMARY KEY, vault TEXT NOT NULL, path TEXT NOT NULL,
    size INTEGER, mtime_ns INTEGER, hash TEXT,
    status TEXT NOT NULL, reason TEXT,
    topic TEXT, topic_key TEXT, tags TEXT, kind TEXT, date TEXT, date_ts REAL, importance REAL,
    supersedes TEXT, entities TEXT, summary TEXT, preview TEXT, meta TEXT, errors TEXT,
    superseded_by TEXT, indexed_at REAL, secrets TEXT, imports TEXT, preview_chars INTEGER
);
CREATE INDEX IF NOT EXISTS notes_path ON notes(vault, path);
CREATE INDEX IF NOT EXISTS notes_topic ON notes(vault, topic_key);
CREATE INDEX IF NOT EXISTS notes_topic_key ON notes(topic_key);
CREATE INDEX IF NOT EXISTS notes_imports ON notes(vault) WHERE imports IS NOT NULL;
CREATE INDEX IF NOT EXISTS notes_counts
    ON notes(status = 'ok', superseded_by IS NULL, errors IS NOT NULL AND errors NOT IN ('', '[]'));
CREATE INDEX IF NOT EXISTS notes_skipped ON notes(key) WHERE status = 'skipped';
-- a listing's order, newest first (Catalog.newest): walked until enough notes in scope are found
CREATE INDEX IF NOT EXISTS notes_written ON notes({WRITTEN} DESC, key) WHERE status = 'ok';
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, note TEXT NOT NULL, ord INTEGER, heading TEXT,
    line_start INTEGER, line_end INTEGER, text TEXT, hash TEXT
);
CREATE INDEX IF NOT EXISTS chunks_note ON chunks(note);
CREATE TABLE IF NOT EXISTS pending (key TEXT PRIMARY KEY);
-- notes whose chunks have no vectors yet: a first index makes text search ready first and
-- embeds these in the background (VaultIndex.fill_vectors); a note has all its vectors or none
CREATE TABLE IF NOT EXISTS unembedded (note TEXT PRIMARY KEY);
"""


# every indexed note, newest first: written_at's order, ties by key, on the notes_written index
NEWEST_FIRST = f"SELECT key FROM notes WHERE status='ok' ORDER BY {WRITTEN} DESC, key"
# Catalog.newest reads the rows of a scope this small instead of walking every note (a walk is
# ~0.4 us a note, a row read by key ~2 us; a walk past 10,000 notes for an empty scope took 4 ms)
FEW_TO_WALK = 512


class FileState(NamedTuple):
    """What the catalog knows of a file's stat and bytes (a named tuple: one per note at each sync)."""

    size: int
    mtime_ns: int
    hash: str | None
    status: str


@functools.lru_cache(maxsize=4096)  # notes share their tag lists: "tags: [ops, deploy]" many times over
def _strings(stored: str | None) -> tuple[str, ...]:
    """A list column as stored (JSON text), as a tuple."""
    return tuple(json.loads(stored)) if stored and stored != "[]" else ()


@dataclass(frozen=True, eq=False)
class NoteRecord:
    """One note as the catalog knows it, for the read side (search, inventory, ops), which never
    sees how it is stored: the list and mapping columns are decoded, each on its first use (a
    filter over every note reads the tags alone)."""

    key: str  # "vault:path"
    vault: str
    path: str  # POSIX, relative to the vault root
    size: int | None
    mtime_ns: int | None
    hash: str | None  # of the file's bytes
    status: str  # "ok" (indexed) or "skipped" (with a reason)
    reason: str | None
    topic: str | None
    topic_key: str | None  # the topic as chains compare it
    kind: str | None
    date: str | None  # as written
    date_ts: float | None
    importance: float | None
    summary: str | None
    preview: str | None  # None when it is the first preview_chars characters of the first chunk
    superseded_by: str | None  # the key of the note that supersedes it
    indexed_at: float | None
    stored_tags: str | None = field(repr=False)
    stored_supersedes: str | None = field(repr=False)
    stored_entities: str | None = field(repr=False)
    stored_meta: str | None = field(repr=False)
    stored_errors: str | None = field(repr=False)
    stored_secrets: str | None = field(repr=False)
    stored_imports: str | None = field(repr=False)
    preview_chars: int | None = field(repr=False)

    @cached_property
    def tags(self) -> tuple[str, ...]:
        return _strings(self.stored_tags)

    @cached_property
    def supersedes(self) -> tuple[str, ...]:
        return _strings(self.stored_supersedes)

    @cached_property
    def entities(self) -> tuple[str, ...]:
        return tuple(json.loads(self.stored_entities)) if self.stored_entities else ()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """Every frontmatter key as read (secrets masked); a copy of one's own to change."""
        return json.loads(self.stored_meta) if self.stored_meta else {}

    @cached_property
    def errors(self) -> tuple[str, ...]:
        """What was lost or guessed reading the file (malformed frontmatter, a legacy encoding)."""
        return tuple(json.loads(self.stored_errors)) if self.stored_errors else ()

    @cached_property
    def secrets(self) -> tuple[tuple[int, str], ...]:
        """(line, kind) of each likely secret masked in the note."""
        return tuple((line, kind) for line, kind in json.loads(self.stored_secrets)) if self.stored_secrets else ()

    @cached_property
    def imports(self) -> tuple[str, ...]:
        return tuple(json.loads(self.stored_imports)) if self.stored_imports else ()


# the notes table's columns in NoteRecord's order, so that a row becomes a record by position
_NOTE_FIELDS = tuple(f.name for f in fields(NoteRecord))
_NOTE_COLUMNS = ", ".join(name.removeprefix("stored_") for name in _NOTE_FIELDS)


def _note(row: tuple) -> NoteRecord:
    """A record from a row of _NOTE_COLUMNS. The frozen dataclass's __init__ sets each of its 26
    fields through object.__setattr__, 2.5 us a record; filled at once, 1.0 us. A warm hybrid
    query reads about 190 records: 0.27 ms of its 7.7 ms (3,000 notes)."""
    note = object.__new__(NoteRecord)
    note.__dict__.update(zip(_NOTE_FIELDS, row))
    return note


class ChunkRecord(NamedTuple):
    """One chunk of a note: where it is in the file, and its text (secrets masked)."""
    id: str  # "vault:path#ord"
    note: str
    ord: int
    heading: str  # the heading path, "CLAUDE.md › Testing › Commands"
    line_start: int
    line_end: int
    text: str
    hash: str  # of the text embedded (the vector's key)


_CHUNK_COLUMNS = ", ".join(ChunkRecord._fields)


class Mark(NamedTuple):
    """A note whose `superseded_by` frontmatter line disagrees with its state (Catalog.marks)."""
    key: str
    vault: str
    path: str
    hash: str
    want: str | None  # the superseding note's path (its key when in another vault), None when current


class Skipped(NamedTuple):
    key: str
    path: str
    reason: str


class Listed(NamedTuple):
    """What a filter over every note reads of each (Catalog.select)."""
    key: str
    topic: str | None
    tags: tuple[str, ...]
    stored_meta: str | None

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads(self.stored_meta) if self.stored_meta else {}


def written_at(note: NoteRecord) -> float:
    """When a note was written: its date, else its file's mtime (the order chains use, and the
    same rule as `select`'s since/until)."""
    return note.date_ts if note.date_ts is not None else (note.mtime_ns or 0) / 1e9


AHEAD_SECONDS = 86400.0  # a note written more than a day from now: a typo'd year, a clock set wrong


def written_how(note: NoteRecord, now: float | None = None) -> dict[str, Any]:
    """Why a note sits where it does in its topic chain: when it was written, from which key
    of its frontmatter or from the file's mtime, and whether that is ahead of now (such a note
    stays current over every newer one until then: the inventory lists it as dated ahead)."""
    at = written_at(note)
    source = date_source(note.meta, note.date_ts)
    out: dict[str, Any] = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(at)),
                           "from": "the file's mtime (no date)" if source == "mtime" else source}
    ahead = at - (time.time() if now is None else now)
    if ahead > AHEAD_SECONDS:
        out["ahead_days"] = round(ahead / 86400.0, 1)
    return out


def indexed_vaults(state_dir: Path) -> list[str]:
    """The names of the vaults an index holds, read without writing anything (no index: [])."""
    path = state_dir / "catalog.sqlite3"
    if not path.is_file():
        return []
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            return [r[0] for r in db.execute("SELECT name FROM vaults ORDER BY name")]
        finally:
            db.close()
    except sqlite3.Error:
        return []


def chunk_id(note_key: str, ord_: int) -> str:
    return f"{note_key}#{ord_}"


def first_chunks(rows: Iterable[NoteRecord]) -> set[str]:
    """The chunks `preview` needs for these notes' previews: the first chunk of each whose
    preview is not stored."""
    return {chunk_id(row.key, 0) for row in rows if row.preview is None and row.preview_chars}


def preview(row: NoteRecord, chunks: dict[str, ChunkRecord]) -> str:
    """A note's preview: as stored, or, as most are (the body's first characters, which begin its
    first chunk), that many characters of its first chunk's text, which `chunks` (by id) holds:
    stored twice, previews were 15 % of a 50,000-note state."""
    if row.preview is not None:
        return row.preview
    first = chunks.get(chunk_id(row.key, 0)) if row.preview_chars else None
    return first.text[: row.preview_chars] if first is not None else ""


SCHEMA_VERSION = "5"
# Older layouts brought forward without a rebuild (a rebuild re-embeds every note). The notes
# are re-read anyway when the pipeline version changes; vectors are reused by content hash.
_PREVIEW_CHARS = "ALTER TABLE notes ADD COLUMN preview_chars INTEGER"
MIGRATIONS = {"2": ["ALTER TABLE notes ADD COLUMN secrets TEXT", "ALTER TABLE notes ADD COLUMN imports TEXT",
                    _PREVIEW_CHARS],
              "3": ["ALTER TABLE notes ADD COLUMN imports TEXT", _PREVIEW_CHARS],
              "4": [_PREVIEW_CHARS]}


def _facts_of(r: tuple) -> Facts:
    """A row of Catalog._FACTS as supersession reads it."""
    return Facts(r[0], r[1], r[2], r[3], r[4], (r[5] or 0) / 1e9,
                 tuple(json.loads(r[6])) if r[6] and r[6] != "[]" else ())


class Catalog:
    def __init__(self, path: Path, writer: bool = True):
        """`writer` may rebuild a catalog of an older layout; a reader refuses it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = connect(path, read_when_full=not writer)
        self._key_sets: dict[str, tuple[tuple[int, int], frozenset[str]]] = {}  # _keys_until_changed
        # a note's chain scope (supersession.Scopes): its vault unless the index says otherwise
        self.scope = Scopes({})
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        version = self.get_meta("schema")
        has_notes = self.db.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='notes'").fetchone()[0]
        self.was_reset = False
        if version in MIGRATIONS and has_notes and writer:
            for sql in MIGRATIONS[version]:  # an older layout that can be brought forward in place
                self.db.execute(sql)
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION and has_notes:
            if not writer:
                how = ("to bring it up to date (in place: no note is read or embedded again)"
                       if version in MIGRATIONS else "to rebuild it")
                raise IndexMissingError(f"the index in {path.parent} has an older layout; "
                                        f"run `vaultmem index` (or restart the daemon) {how}")
            # an older layout: start over (the notes are the truth; the caller re-indexes)
            log.warning("the index in %s has an older layout; it is made again from the notes", path.parent)
            self.db.executescript("DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS chunks; "
                                  "DROP TABLE IF EXISTS pending; DROP TABLE IF EXISTS unembedded; DELETE FROM meta;")
            self.was_reset = True
        self.db.executescript(SCHEMA)
        if self.get_meta("schema") != SCHEMA_VERSION:  # a reader writes nothing on an index of this layout
            self.set_meta("schema", SCHEMA_VERSION)

    def close(self) -> None:
        self.db.close()

    # -------------------------------------------------------------- meta and vaults

    def get_meta(self, k: str) -> str | None:
        row = self.db.execute("SELECT v FROM meta WHERE k=?", (k,)).fetchone()
        return row[0] if row else None

    def set_meta(self, k: str, v: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, v))

    def vaults(self) -> list[Vault]:
        return [Vault(r["name"], Path(r["root"])) for r in self.db.execute("SELECT * FROM vaults ORDER BY name")]

    def put_vault(self, vault: Vault) -> None:
        self.db.execute("INSERT OR REPLACE INTO vaults VALUES (?, ?)", (vault.name, str(vault.root)))

    def drop_vault(self, name: str) -> None:
        """Forget a vault's name (its notes are removed by the caller first)."""
        self.db.execute("DELETE FROM vaults WHERE name=?", (name,))

    # -------------------------------------------------------------- sync state

    def files(self, vault: str, under: str | None = None) -> dict[str, FileState]:
        """Known files of a vault, or only the file or directory `under` (vault-relative)."""
        cols = "SELECT key, size, mtime_ns, hash, status FROM notes WHERE vault=?"
        if under:  # the file itself, or everything below the directory: two index lookups (the
            # same test joined by OR scanned the whole vault, 6 ms a path at 10,000 notes)
            rows = self.db.execute(f"{cols} AND path=? UNION ALL {cols} AND path>=? AND path<?",
                                   (vault, under, vault, under + "/", under + "0"))
        else:
            # a vault of most notes is read in the table's order: by its index on vault, each row
            # was a lookup of its own, in topic order (50,000 notes: 0.11 s, read in order 0.055)
            mine = self.db.execute("SELECT COUNT(*) FROM notes WHERE vault=?", (vault,)).fetchone()[0]
            table = "notes NOT INDEXED" if 4 * mine > self.size() else "notes"
            rows = self.db.execute(f"SELECT key, size, mtime_ns, hash, status FROM {table} WHERE vault=?", (vault,))
        return {r[0]: FileState(r[1], r[2], r[3], r[4]) for r in rows}

    def paths(self, vault: str) -> list[str]:
        """Every known note path of a vault (indexed and skipped), vault-relative."""
        return [r[0] for r in self.db.execute("SELECT path FROM notes WHERE vault=?", (vault,))]

    def imports(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """The `@path` imports of the notes that have any, as written, by vault and note path."""
        out: dict[str, dict[str, tuple[str, ...]]] = {}
        for vault, path, raws in self.db.execute("SELECT vault, path, imports FROM notes WHERE imports IS NOT NULL"):
            out.setdefault(vault, {})[path] = tuple(json.loads(raws))
        return out

    def pending(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM pending")}

    def mark_pending(self, keys: Iterable[str]) -> None:
        with transaction(self.db):
            self.db.executemany("INSERT OR IGNORE INTO pending VALUES (?)", [(k,) for k in keys])

    def unembedded(self, limit: int) -> list[str]:
        """Up to `limit` notes without vectors yet, in the order they were read. Not current or
        newest first: at 50,000 notes waiting, a sort by date cost 14 ms a step, and skipping
        the superseded ones grew with every step."""
        return [r[0] for r in self.db.execute("SELECT note FROM unembedded LIMIT ?", (limit,))]

    def unembedded_chunks(self) -> int:
        """The chunks of the notes without vectors yet: the rows the vector table will gain."""
        return self.db.execute("SELECT COUNT(*) FROM chunks WHERE note IN (SELECT note FROM unembedded)").fetchone()[0]

    def unembedded_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM unembedded").fetchone()[0]

    def unembedded_set(self) -> frozenset[str]:
        """The notes without vectors yet; the same object until the catalog changes."""
        return self._keys_until_changed("SELECT note FROM unembedded")

    def embedded(self, keys: Iterable[str]) -> None:
        """These notes have their vectors now (and are pending no more: VaultIndex.fill_vectors)."""
        with transaction(self.db):
            self.db.executemany("DELETE FROM unembedded WHERE note=?", [(k,) for k in keys])
            self.db.executemany("DELETE FROM pending WHERE key=?", [(k,) for k in keys])

    def size(self) -> int:
        """Rows in the notes table (indexed and skipped)."""
        return self.db.execute("SELECT COUNT(*) FROM notes").fetchone()[0]

    def clear(self) -> None:
        """Forget every note (the vault list and meta stay)."""
        with transaction(self.db):
            self.db.execute("DELETE FROM chunks")
            self.db.execute("DELETE FROM notes")
            self.db.execute("DELETE FROM pending")
            self.db.execute("DELETE FROM unembedded")

    def write(self, notes: list[tuple[Note, int, int, str, list[str]]],
              skipped: list[tuple[str, str, str, int, int, str | None, str]],
              removed: Iterable[str], done: Iterable[str],
              touched: Iterable[tuple[str, int, int]] = (), chains: str = "touched",
              unembedded: Iterable[str] = ()) -> None:
        """One transaction: upsert `notes` (note, size, mtime_ns, hash, chunk hashes), record
        `skipped` (key, vault, path, size, mtime_ns, hash, reason), drop `removed`, give the
        `touched` files (key, size, mtime_ns: same bytes, new stat) their stat, clear `done`
        from pending, list the `unembedded` notes (written without vectors), and derive
        supersession again: of the chains these files were and are in (`chains="touched"`),
        or of every note (`"all"`). A reader never sees a note written and its chain not yet: a
        new note beside the one it supersedes, both current."""
        now = time.time()
        touched = list(touched)
        keys = [n.key for n, *_ in notes] + [s[0] for s in skipped] + list(removed)
        changed = keys + [t[0] for t in touched]
        with transaction(self.db):
            before = self.affected(changed) if chains == "touched" else None
            self.db.executemany("DELETE FROM chunks WHERE note=?", [(k,) for k in keys])
            self.db.executemany("DELETE FROM notes WHERE key=?", [(k,) for k in keys])
            self.db.executemany("DELETE FROM unembedded WHERE note=?", [(k,) for k in keys])
            self.db.executemany("INSERT INTO unembedded VALUES (?)", [(k,) for k in unembedded])
            for note, size, mtime_ns, digest, hashes in notes:
                shared = bool(note.preview) and bool(note.chunks) and note.chunks[0].text.startswith(note.preview)
                self.db.execute(
                    "INSERT INTO notes VALUES (?,?,?,?,?,?,'ok',NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,?,?,?,?)",
                    (note.key, note.vault, note.path, size, mtime_ns, digest,
                     note.topic, topic_key(note.topic), json.dumps(list(note.tags), ensure_ascii=False), note.kind, note.date,
                     note.date_ts, note.importance, json.dumps(list(note.supersedes), ensure_ascii=False),
                     json.dumps(list(note.entities), ensure_ascii=False), note.summary,
                     None if shared else note.preview,
                     json.dumps(note.meta, ensure_ascii=False, default=str),
                     json.dumps(list(note.errors), ensure_ascii=False), now,
                     json.dumps([list(s) for s in note.secrets]) if note.secrets else None,
                     json.dumps(list(note.imports), ensure_ascii=False) if note.imports else None,
                     len(note.preview) if shared else None),
                )
                self.db.executemany(
                    "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?)",
                    [(chunk_id(note.key, c.ord), note.key, c.ord, c.heading, c.line_start, c.line_end, c.text, h)
                     for c, h in zip(note.chunks, hashes)],
                )
            self.db.executemany(
                "INSERT INTO notes (key, vault, path, size, mtime_ns, hash, status, reason, indexed_at)"
                " VALUES (?,?,?,?,?,?,'skipped',?,?)", [(*row, now) for row in skipped])
            self.db.executemany("UPDATE notes SET size=?, mtime_ns=? WHERE key=?",
                                [(size, mtime_ns, key) for key, size, mtime_ns in touched])
            self.db.executemany("DELETE FROM pending WHERE key=?", [(k,) for k in done])
            if before is None:
                self.recompute_supersession()
            else:
                after = self.affected(changed)
                self.recompute_supersession(before[0] | after[0], before[1] | after[1])

    # -------------------------------------------------------------- supersession

    _FACTS = "SELECT key, vault, path, topic, date_ts, mtime_ns, supersedes, superseded_by FROM notes"

    def _facts(self, where: str = "", args: tuple = ()) -> dict[str, tuple[Facts, str | None]]:
        rows = self.db.execute(f"{self._FACTS} WHERE status='ok' {where}", args)
        return {r[0]: (_facts_of(r), r[7]) for r in rows}

    def affected(self, keys: Iterable[str]) -> tuple[set[str], set[tuple[str, str]]]:
        """What the given notes' supersession depends on, as they stand now: the notes
        themselves plus those their `supersedes:` names by path, and the (vault, topic key) of
        their topics and of the topics they retire (their chain scope's, not always their vault's).
        Taken before and after a change."""
        notes, topics = set(keys), set()
        for r in self.notes(keys).values():
            scope = self.scope(r.vault, r.path)
            if r.topic_key:
                topics.add((scope, r.topic_key))
            for ref in r.supersedes:
                topics.add((scope, topic_key(ref) or ""))
                for cand in path_candidates(ref, r.path):
                    notes.add(f"{r.vault}:{cand}")
        return notes, topics

    def recompute_supersession(self, keys: set[str] | None = None,
                               topics: set[tuple[str, str]] | None = None) -> int:
        """Derive superseded_by from the facts; return how many rows changed. With `keys` and
        `topics` (the notes a change touched and every (vault, topic) they had before or have
        now), only the chains concerned are recomputed: those topics, every note that retires
        something with `supersedes:`, and what those notes name."""
        if keys is None:
            facts = self._facts()
        else:
            facts = self._facts("AND supersedes IS NOT NULL AND supersedes != '[]'")
            for k in keys:
                facts.update(self._facts("AND key=?", (k,)))
            wanted = set(topics or ())
            for f, _ in list(facts.values()):
                for ref in f.supersedes:
                    wanted.add((self.scope(f.vault, f.path), topic_key(ref) or ""))
                    for cand in path_candidates(ref, f.path):
                        facts.update(self._facts("AND vault=? AND path=?", (f.vault, cand)))
            for f, _ in list(facts.values()):  # every note in play brings its whole chain
                if f.topic:
                    wanted.add((self.scope(f.vault, f.path), topic_key(f.topic) or ""))
            for scope, tk in wanted:
                if tk:  # a chain may span vaults: its topic's notes anywhere, those of the scope kept
                    facts.update({k: v for k, v in self._facts("AND topic_key=?", (tk,)).items()
                                  if self.scope(v[0].vault, v[0].path) == scope})
        state = compute([f for f, _ in facts.values()], self.scope)
        changes = [(v, k) for k, v in state.items() if facts[k][1] != v]
        with transaction(self.db):
            self.db.executemany("UPDATE notes SET superseded_by=? WHERE key=?", changes)
            if keys is None:
                self.set_meta("chains", self.scope.stamp())
        return len(changes)

    def chains_derived(self) -> bool:
        """Whether every chain was derived under the scopes and rules in use: since then each
        change re-derived the chains it touched in its own commit (see recompute_supersession),
        so the catalog's chains are what its facts make them."""
        return self.get_meta("chains") == self.scope.stamp()

    def supersession_at(self, moment: float) -> dict[str, str | None]:
        """The chains as they stood at `moment` (seconds since the epoch): every note written
        before it (by date, else mtime, as chains order notes) mapped to the note that
        superseded it then, or None if it was current."""
        rows = self.db.execute(f"{self._FACTS} WHERE status='ok' AND {WRITTEN} < ?",
                               (moment,))  # Facts.order's time, compared in SQL
        return compute([_facts_of(r) for r in rows], self.scope)

    # -------------------------------------------------------------- reads for search

    def version(self) -> tuple[int, int]:
        """Changes whenever any connection commits: (SQLite's data_version, this connection's
        total_changes). Used to cache derived sets between commits."""
        return self.db.execute("PRAGMA data_version").fetchone()[0], self.db.total_changes

    def marks(self) -> list[Mark]:
        """The notes whose `superseded_by` frontmatter value disagrees with their state (for
        `mark_superseded`), with `want`: the superseding note's path (its key when in another
        vault), or NULL for a current note. Compared in SQL: usually no row comes back, and
        10,000 notes take a few milliseconds."""
        return [Mark(*r) for r in self.db.execute("""
            SELECT key, vault, path, hash, want FROM (
                SELECT key, vault, path, hash, meta,
                       CASE WHEN superseded_by IS NULL THEN NULL
                            WHEN substr(superseded_by, 1, length(vault) + 1) = vault || ':'
                                THEN substr(superseded_by, length(vault) + 2)
                            ELSE superseded_by END AS want
                FROM notes WHERE status = 'ok')
            WHERE want IS NOT (CASE WHEN json_valid(meta) THEN json_extract(meta, '$.superseded_by') END)
        """)]

    def superseded(self) -> frozenset[str]:
        """Keys of superseded notes; the same object is returned until the catalog changes."""
        return self._keys_until_changed("SELECT key FROM notes WHERE status='ok' AND superseded_by IS NOT NULL")

    def vault_names(self) -> frozenset[str]:
        """The vaults the catalog has notes of; the same object until the catalog changes."""
        return self._keys_until_changed("SELECT DISTINCT vault FROM notes")

    def _keys_until_changed(self, sql: str) -> frozenset[str]:
        """The first column of `sql`'s rows, read again only after a commit (version())."""
        v = self.version()
        got = self._key_sets.get(sql)
        if got is None or got[0] != v:
            got = self._key_sets[sql] = (v, frozenset(r[0] for r in self.db.execute(sql)))
        return got[1]

    def select(self, *, vaults: list[str] | None = None, kinds: list[str] | None = None,
               since: float | None = None, until: float | None = None,
               current_only: bool = True) -> list[Listed]:
        """Notes by vault, kind and written time (date, else mtime; `until` exclusive)."""
        sql = "SELECT key, tags, topic, meta FROM notes WHERE status='ok'"
        args: list[Any] = []
        written = "coalesce(date_ts, mtime_ns / 1e9)"
        if since is not None:
            sql += f" AND {written} >= ?"
            args.append(since)
        if until is not None:
            sql += f" AND {written} < ?"
            args.append(until)
        if vaults:
            sql += f" AND vault IN ({','.join('?' * len(vaults))})"
            args += vaults
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += kinds
        if current_only:
            sql += " AND superseded_by IS NULL"
        return [Listed(key, topic, _strings(tags), meta) for key, tags, topic, meta in self.db.execute(sql, args)]

    def _rows(self, select: str, column: str, values: Iterable[str]) -> list[tuple]:
        values = list(values)
        out: list[tuple] = []
        for i in range(0, len(values), 500):  # SQLite caps the number of parameters
            part = values[i : i + 500]
            out += self.db.execute(f"{select} WHERE {column} IN ({','.join('?' * len(part))})", part).fetchall()
        return out

    def notes(self, keys: Iterable[str]) -> dict[str, NoteRecord]:
        """The records of these keys (indexed or skipped) that the catalog holds."""
        return {r[0]: _note(r) for r in self._rows(f"SELECT {_NOTE_COLUMNS} FROM notes", "key", keys)}

    def newest(self, k: int, allow: Set[str] | None = None, deny: Set[str] | None = None) -> list[str]:
        """The `k` indexed notes written last (written_at: date, else mtime; ties by key), of
        `allow` (None: any) and not of `deny`. The notes are walked newest first, on the
        notes_written index, until `k` are found: a listing read every record in scope to sort
        them (30 ms of a session-start digest at 10,000 notes; 0.2 ms now)."""
        out: list[str] = []
        if k <= 0:
            return out
        if allow is not None and len(allow) <= FEW_TO_WALK:  # their own rows cost less than the walk past the rest
            rows = self._rows(f"SELECT key, {WRITTEN}, status FROM notes", "key", allow)
            ok = [(-at, key) for key, at, status in rows if status == "ok" and not (deny and key in deny)]
            return [key for _, key in sorted(ok)[:k]]
        for (key,) in self.db.execute(NEWEST_FIRST):
            if (allow is None or key in allow) and not (deny and key in deny):
                out.append(key)
                if len(out) == k:
                    break
        return out

    def all_notes(self) -> list[NoteRecord]:
        """Every indexed (not skipped) note, by key."""
        return [_note(r) for r in self.db.execute(
            f"SELECT {_NOTE_COLUMNS} FROM notes WHERE status='ok' ORDER BY key")]

    def topic_notes(self, topic: str, vault: str | None = None, current_only: bool = False,
                    scope: str | None = None) -> list[str]:
        """Keys of the notes on a topic (compared as chains compare topics), by key: of one
        vault, or of one chain scope (`scope`: the chain a note written there would join)."""
        sql = "SELECT key, vault, path FROM notes WHERE status='ok' AND topic_key=?"
        args: list[Any] = [topic_key(topic)]
        if vault:
            sql += " AND vault=?"
            args.append(vault)
        if current_only:
            sql += " AND superseded_by IS NULL"
        return [r[0] for r in self.db.execute(sql + " ORDER BY key", args)
                if scope is None or self.scope(r[1], r[2]) == scope]

    def chunks_of(self, keys: Iterable[str]) -> list[ChunkRecord]:
        """Every chunk of these notes, in order."""
        return sorted((ChunkRecord(*r) for r in self._rows(f"SELECT {_CHUNK_COLUMNS} FROM chunks", "note", keys)),
                      key=lambda ch: (ch.note, ch.ord))

    def chunks(self, ids: Iterable[str]) -> dict[str, ChunkRecord]:
        return {r[0]: ChunkRecord(*r) for r in self._rows(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks", "id", ids)}

    def counts(self) -> dict[str, int]:
        """Read from the notes_counts index, not the rows: `status` is asked for while a first
        index is written, and a script waiting for readiness asks often (10,000 notes: 7 ms a
        call from the rows, 0.9 ms from the index). The index's first column is an expression,
        so that the planner never takes it for the scans of every indexed note (WHERE
        status='ok'), which it made slower by up to half."""
        out = {"notes": 0, "skipped": 0, "current": 0, "read_with_problems": 0}
        for ok, current, problems, n in self.db.execute(
                "SELECT status = 'ok', superseded_by IS NULL, errors IS NOT NULL AND errors NOT IN ('', '[]'), "
                "COUNT(*) FROM notes GROUP BY 1, 2, 3"):
            if not ok:
                out["skipped"] += n
            else:
                out["notes"] += n
                out["current"] += n if current else 0
                out["read_with_problems"] += n if problems else 0
        out["chunks"] = self.db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return out

    def skipped(self) -> list[Skipped]:
        return [Skipped(*r) for r in self.db.execute(
            "SELECT key, path, reason FROM notes WHERE status='skipped' ORDER BY key")]
