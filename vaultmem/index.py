"""The index as a whole: the state directory's layout (catalog, Tantivy, LanceDB), the writer
lock, and `sync`, which brings all three in line with the files of the vaults.

Sync reads only files whose size or mtime changed (then compares content hashes), embeds only
chunk texts whose hash has no stored vector, and writes each batch of files crash-safely: the
notes are marked pending in the catalog, the engines are changed and committed, then the catalog
records the result and clears the marks. A restart after a crash redoes the pending notes.
Notes are only ever read here, except that with `mark_superseded` turned on (off by default)
each note's `superseded_by` frontmatter line is kept in line with its state, through writing.py.

Its size (about 900 lines) is one class's: sync, the crash-safe batch, the writer lock, the
check and the repair share the three engines and the pending marks; split apart, each part
would reach into the others' state (the circle the daemon's split had to avoid).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .catalog import Catalog, FileState, chunk_id
from .client import daemon_record
from .db import no_room
from .agents import claude_home
from .config import Settings, Vault, nest
from .embedders import E5Embedder, Embedder, UseEmbedder, make_embedder
from .errors import (DatabaseUnreadable, DiskFullError, EmbedderMismatchError, IndexBusy, IndexDamagedError,
                     IndexMissingError, UsageError, VaultmemError, is_disk_full)
from .fulltext import FullText
from .notes import PIPELINE_VERSION, Note, Unreadable, content_hash, embed_text, embed_text_of, parse_note
from . import imports, integrity, private, writing
from .scan import ScannedFile, is_note_path, is_under, scan_vault, stat_file
from .supersession import Scopes

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    files: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    vectors_later: int = 0  # notes written without vectors, embedded in the background (fill_vectors)
    marked: int = 0  # notes whose superseded_by line was written (mark_superseded)
    seconds: float = 0.0
    problems: dict[str, str] = field(default_factory=dict)
    moved: dict[str, str] = field(default_factory=dict)  # old key -> new key: same bytes, new path
    missing: list[str] = field(default_factory=list)  # vaults whose directory was not there: kept
    repaired: dict[str, str] = field(default_factory=dict)  # engine -> why it was made anew (integrity.py)

    @property
    def changes(self) -> int:
        return self.added + self.updated + self.removed + self.skipped

    def summary(self) -> str:
        return (
            f"{self.files} files: {self.added} added, {self.updated} updated, {self.removed} removed, "
            f"{self.unchanged} unchanged, {self.skipped} skipped; {self.chunks_embedded} chunks embedded, "
            f"{self.chunks_reused} reused; {self.seconds:.2f}s"
        ) + (f"; vectors of {self.vectors_later} notes to embed in the background" if self.vectors_later else "") + (
            f"; {len(self.moved)} moved" if self.moved else "") + (
            f"; superseded_by line updated in {self.marked} note{'s' if self.marked != 1 else ''}" if self.marked else "") + (
            f"; vault {', '.join(self.missing)} not found, its notes kept as last indexed" if self.missing else "") + (
            f"; made again from the notes: the {' and the '.join(integrity.PART[p] for p in self.repaired)}"
            if self.repaired else "")


def _catalog_damaged(path: Path, why: str) -> IndexDamagedError:
    return IndexDamagedError(f"the catalog {path} is damaged ({why}); `vaultmem index` moves it aside and makes "
                             "the index again from the notes")


def _writes(method):
    """A method that writes the index. When it fails, what the full-text writer holds
    uncommitted is dropped (what was left undone is marked pending in the catalog and redone by
    the next sync, as after a crash), and a full disk, however the engine says it (an OSError,
    a SQLite, Lance or Tantivy error), becomes a DiskFullError that says what to do."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException as err:
            self.fulltext.discard_writes()
            full = isinstance(err, Exception) and not isinstance(err, VaultmemError) and (
                is_disk_full(err) or no_room(self.state_dir))
            if not full:
                raise
            raise DiskFullError(f"no space left on the disk of {self.state_dir} to write the index; free some "
                                "space and run it again (what was left undone is redone then)") from err
    return wrapper


def file_digest(data: bytes) -> str:
    """A note file's identity in the catalog (`hash`): its bytes, not its name or times."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def embedder_identity(settings: Settings) -> tuple[str, int]:
    e = settings.embedder
    if e.kind == "use":
        return UseEmbedder.id, UseEmbedder.dim
    if e.kind == "e5":
        return E5Embedder.id, E5Embedder.dim
    return f"{e.kind}:{e.model}", e.dim


class VaultIndex:
    """An opened state directory. `writable` takes the writer lock (one writer at a time)."""

    def __init__(self, settings: Settings, writable: bool = False, share_vectors_of: "VaultIndex | None" = None,
                 model_cache: Path | None = None, verify: bool = False):
        """`share_vectors_of`: use another VaultIndex's vector table (the daemon's reader shares
        the writer's, so its in-memory copy is always the one just written). `model_cache`: a
        directory where the embedder may keep a file to map part of its model from (the daemon
        passes one; a short-lived command has no use for it). `verify`: a reader checks that
        each engine holds what the catalog says (the full-text index now, the vector table
        when first opened) and an engine that does not refuses to answer (check); the daemon's
        reader needs none, its writer checks after every full sync."""
        self.settings = settings
        self.verify = verify and not writable
        self.state_dir = settings.state_dir
        self.writable = writable
        catalog_path = self.state_dir / "catalog.sqlite3"
        self._lock_fd: int | None = None
        if writable:
            # the state dir holds note text: its user's alone, whatever the umask (private.py)
            private.restrict_umask()
            private.own_dir(self.state_dir, "the state directory")
            self._take_lock()
            if changed := private.tighten(self.state_dir):
                log.info("%d file(s) in %s were readable by others: now yours alone", changed, self.state_dir)
        elif problem := private.dir_problem(self.state_dir, "the state directory", loose_ok=True):
            raise private.NotPrivateError(problem)
        elif not catalog_path.exists():
            raise IndexMissingError(
                f"no index in {self.state_dir}; run `vaultmem index --vault DIR --state-dir {self.state_dir}` first")
        self._repaired: dict[str, str] = {}  # what opening made anew (said by the next sync's report)
        try:
            self.catalog = self._open_catalog(catalog_path)
            self.fulltext = FullText(self.state_dir / "tantivy", writable=writable)
        except BaseException:  # the lock is not kept by an index that did not open (the daemon tries again)
            if getattr(self, "catalog", None) is not None:
                self.catalog.close()
            self._release_lock()
            raise
        self.resets = 0  # how often an engine was made anew (a reader of its files must open them again)
        self.damaged: dict[str, str] = {}  # a reader's engines that do not hold what the catalog says
        self._vectors = None
        # opened on first use, by the writer thread or a query: the daemon's first start made the
        # table twice when a query came during its first index ("Table 'chunks' already exists")
        self._vectors_lock = threading.Lock()
        self._vectors_owner = share_vectors_of
        # a sync or update that reads this many notes or more writes them without vectors, for
        # fill_vectors to embed later (0: never; the daemon's writer sets it)
        self.vectors_later_at = 0
        self._embedder: Embedder | None = None
        self._model_cache = model_cache
        self._marking = False  # re-reading the notes mark_superseded wrote
        self._unmarkable: dict[str, str] = {}  # note -> the content mark_superseded gave up on
        if self.verify:
            self.check(parts=("fulltext",))
        self.catalog.scope = self.scopes()
        if self.catalog.was_reset and writable:  # said why where it was found
            self.rebuild()
        elif self.fulltext.was_reset:  # vectors and catalog stand: the next sync re-reads every note
            self.catalog.set_meta("pipeline", "")
            self._repaired["fulltext"] = self.fulltext.was_reset

    def _open_catalog(self, path: Path) -> Catalog:
        """The catalog; a writer that finds it damaged on disk (SQLite: "file is not a database")
        moves it aside and starts a new one, which rebuilds the index from the notes: the
        catalog is derived from them. Failing instead, the daemon could never start again."""
        why: str | None
        try:
            catalog = Catalog(path, writer=self.writable)
        except DatabaseUnreadable as err:
            if not err.damaged:
                raise
            if not self.writable:
                raise _catalog_damaged(path, str(err).rsplit(": ", 1)[-1]) from None
            why = "not a database"
        except sqlite3.DatabaseError as err:  # a page read while it was opened
            if not self.writable:
                raise _catalog_damaged(path, str(err)) from None
            why = str(err)
        else:
            # a writer reads every page once (SQLite reads a page only when a query reaches it: a
            # page of garbage gave a traceback at the first query to touch it, and `index
            # --rebuild` deleted both engines before it failed on the catalog)
            why = integrity.catalog_problem(catalog.db) if self.writable else None
            if not why:
                return catalog
            catalog.close()
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, aside)
        for side in ("-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
        log.warning("the catalog %s is damaged (%s); moved to %s, and the index is made again from the notes",
                    path, why, aside.name)
        catalog = Catalog(path, writer=True)
        catalog.was_reset = True
        self._repaired["catalog"] = f"was damaged ({why}); kept as {aside.name}"
        return catalog

    def _take_lock(self) -> None:
        """The writer lock, an flock on `writer.lock`, which also holds the holder's pid so that
        a refused second writer can say who has it (the lock, not the pid, is what counts: the
        kernel drops it when its process dies, SIGKILL included)."""
        fd = private.open_nofollow(self.state_dir / "writer.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            pid = int(holder) if holder.isdigit() else None
            record = daemon_record(self.state_dir) or {}
            if pid is not None and record.get("pid") == pid:  # as `vaultmem status` names it
                raise IndexBusy(f"the vaultmem daemon (pid {pid}, on {record['socket']}) keeps {self.state_dir}: "
                                "`vaultmem reindex` has it catch up with the files", pid) from None
            who = f"pid {pid}" if pid is not None else "another process"
            raise IndexBusy(
                f"another vaultmem process ({who}) is writing {self.state_dir}: a daemon? `vaultmem status` "
                "tells, and `vaultmem reindex` has a running daemon catch up with the files", pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def close(self) -> None:
        self.fulltext.close()
        self.catalog.close()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "VaultIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- lazily opened parts

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            embedder = make_embedder(self.settings.embedder)
            if self._model_cache is not None and hasattr(embedder, "map_table"):
                released = embedder.map_table(self._model_cache)
                if released:
                    log.info("the embedding model's word table (%d MB) is served from a file map in %s",
                             released >> 20, self._model_cache)
            self._embedder = embedder
        return self._embedder

    @property
    def vectors(self):
        if self._vectors_owner is not None:
            return self._vectors_owner.vectors
        if self._vectors is None:  # the lock is taken only until the table is open, not by every query
            with self._vectors_lock:
                if self._vectors is None:
                    from .vectors import Vectors

                    ident, dim = embedder_identity(self.settings)
                    if not dim:
                        ident, dim = self.embedder.id, self.embedder.dim
                    vectors = Vectors(self.state_dir / "lance", ident, dim, self.settings.embedder.vector_dtype,
                                      writable=self.writable)
                    self._vectors = vectors
                    if self.verify:  # a reader's table is checked when it is first opened
                        self.check(parts=("vectors",))
        return self._vectors

    @property
    def vectors_open(self) -> bool:
        return self._vectors is not None or self._vectors_owner is not None

    def _wrote_vectors(self) -> None:
        """Keep in the catalog what the vector table's files are now (integrity.vector_files),
        and which embedder made its vectors (check_embedder)."""
        self.catalog.set_meta("vector_files", integrity.vector_files(self.state_dir / "lance"))
        ident, dim = embedder_identity(self.settings)
        self.catalog.set_meta("embedder", f"{ident}:{dim}")

    def indexed_embedder(self) -> tuple[str, int] | None:
        """The embedder whose vectors the index holds, as the catalog recorded it, or None."""
        value = self.catalog.get_meta("embedder") or ""
        ident, _, dim = value.rpartition(":")
        return (ident, int(dim)) if ident and dim.isdigit() else None

    def check_embedder(self, settings: Settings | None = None) -> None:
        """Raise EmbedderMismatchError (exit 4) when `settings` (default: this index's) name
        another embedder than the one whose vectors the index holds: said before a daemon starts
        or reloads into it, instead of a write that fails again and again. An index that has
        not recorded its embedder yet is asked its vector table (once: then it is recorded)."""
        ident, dim = embedder_identity(settings or self.settings)
        have = self.indexed_embedder()
        if have is None:
            if not (self.state_dir / "lance").is_dir() or settings is not None:
                return
            _ = self.vectors  # raises on a table of another embedder
            if self.writable:
                self._wrote_vectors()
            return
        if have[0] != ident or (dim and have[1] and have[1] != dim):
            raise EmbedderMismatchError(
                f"the index holds vectors of embedder {have[0]} ({have[1]}-d), but {ident}"
                f"{f' ({dim}-d)' if dim else ''} is configured: `vaultmem index --rebuild` re-embeds every note "
                "with it (minutes), or configure the embedder that made them again")

    def check(self, sample: int = integrity.SAMPLE_CHUNKS, parts: tuple[str, ...] = integrity.ENGINES) -> dict[str, str]:
        """{"fulltext" | "vectors": why} for each engine among `parts` that does not hold what
        the catalog says (integrity.py). A reader's engine found so refuses to answer from then
        on, with a line that says what to run."""
        problems = integrity.engine_problems(self, sample, parts)
        if not self.writable:
            for part in parts:
                engine = self.fulltext if part == "fulltext" else self.vectors
                engine.damaged = integrity.damaged(self.state_dir, part, problems[part]) if part in problems else None
            self.damaged.update(problems)
        return problems

    def repair(self, problems: dict[str, str], say: bool = True) -> None:
        """Make the engines in `problems` anew, empty; the next sync reads every note again
        (the vectors of unchanged text are reused from a table that stands)."""
        import shutil

        assert self.writable
        for part, why in problems.items() if say else ():
            log.warning("the %s in %s %s: it is made again from the notes", integrity.PART[part], self.state_dir, why)
        if "fulltext" in problems:
            self.fulltext.close()
            self.fulltext.retired = True
            shutil.rmtree(self.state_dir / "tantivy", ignore_errors=True)
            self.fulltext = FullText(self.state_dir / "tantivy")
        if "vectors" in problems:
            # under the lock that opens the table: a reader sharing it (the daemon's warm-up, a
            # query) could otherwise open the old table between the two, and the next sync
            # take vectors from that table's copy in memory for "unchanged" text
            with self._vectors_lock:
                if self._vectors is not None:  # a thread may still hold it (the daemon's warm-up)
                    self._vectors.retired = True
                self._vectors = None
                shutil.rmtree(self.state_dir / "lance", ignore_errors=True)
            self.catalog.set_meta("vector_files", "")
            self.catalog.set_meta("embedder", "")
        for part in problems:
            integrity.forget_unreadable(self.state_dir, part)
        if problems:
            self.resets += 1
            self.catalog.set_meta("pipeline", "")

    def scopes(self) -> Scopes:
        """The chain scopes of the vaults in the index (supersession.Scopes): Claude Code's memory
        of a project with that project's vault, the vaults the config says share topics."""
        vaults = {v.name: v for v in self.catalog.vaults()}
        vaults.update({v.name: v for v in self.settings.vaults})
        home = claude_home().resolve()
        claude = next((n for n, v in vaults.items() if v.root == home), None)
        return Scopes({n: str(v.root) for n, v in vaults.items()}, claude, self.settings.shared_topics)

    def vaults(self) -> list[Vault]:
        """Every vault in the index (each owning its files but those of a served vault nested
        in it)."""
        indexed = self.catalog.vaults()
        return nest(indexed, list(self.settings.vaults) or indexed)

    def served(self) -> list[Vault]:
        """The vaults kept in line with their files: those the settings name (config file or
        --vault), else every vault in the index."""
        return list(self.settings.vaults) or self.vaults()

    def vault_status(self, served: list[Vault]) -> list[dict]:
        """`served` first, then the vaults in the index that are not (configured: false)."""
        names = {v.name for v in served}
        return [v.status() for v in served] + [v.status(configured=False) for v in self.vaults() if v.name not in names]

    @_writes
    def drop_vaults(self, names: list[str]) -> SyncReport:
        """Take vaults' notes out of the index: the user removed them from the config, and asked
        (`vaultmem reindex --drop-vault`). Their files are not touched. Refused, before anything
        is done, for a vault the settings name (the next sync would index it again) or one the
        index does not have."""
        assert self.writable, "drop_vaults needs a writable index"
        configured, indexed = {v.name for v in self.settings.vaults}, {v.name for v in self.vaults()}
        for name in names:
            if name in configured:
                raise UsageError(f"vault {name} is in the config (or --vault): take it out there first, "
                                 "or it is indexed again at the next sync")
            if name not in indexed:
                raise UsageError(f"no vault named {name} in the index (see `vaultmem status`)")
        started = time.perf_counter()
        report = SyncReport()
        known: dict[str, FileState] = {}
        for name in names:
            known.update(self.catalog.files(name))
        pending = {k for k in self.catalog.pending() if k.split(":", 1)[0] in names}
        self._reconcile({}, known, pending, report, None, full=True)
        for name in names:
            self.catalog.drop_vault(name)
        log.info("vault %s dropped from the index: %d note(s) removed; the files are untouched",
                 ", ".join(names), report.removed)
        report.seconds = time.perf_counter() - started
        return report

    def refresh(self) -> None:
        """See what another VaultIndex on the same state dir has committed since."""
        self.fulltext.index.reload()
        if self._vectors is not None:
            self._vectors.refresh()

    @_writes
    def optimize(self) -> None:
        """Upkeep: compact the vector table and drop its old versions; let Tantivy delete files
        no segment uses. Run by the writer only."""
        assert self.writable
        self.vectors.optimize()
        self._wrote_vectors()
        self.fulltext.garbage_collect()

    # -------------------------------------------------------------- sync

    @_writes
    def sync(self, vaults: list[Vault] | None = None,
             progress: Callable[[int, int, int], None] | None = None) -> SyncReport:
        """Bring the index in line with every file of `vaults` (default: every known vault).
        A vault whose directory is not there (an unmounted drive, a checkout moved aside) is
        left as last indexed, not read as every note deleted: re-embedding it all when it is
        back would take minutes, and its notes stay findable meanwhile (`report.missing`).
        Then check that each engine holds what the catalog says (integrity.py): one that does
        not, or that failed to be read during the sync, is made anew and the sync runs again
        (`report.repaired` says what was)."""
        assert self.writable, "sync needs a writable index"
        repaired, self._repaired = self._repaired, {}
        for attempt in (1, 2):
            try:
                report = self._sync(vaults, progress)
                if not self.vectors_later_at:  # an index in this process ends with every vector
                    self._fill_all()
            except IndexDamagedError as err:
                problems = self.check() or {"fulltext" if "full-text" in str(err) else "vectors": str(err)}
            else:
                problems = self.check()
                if not problems:
                    if self.vectors_open:  # checked: what its files are now is what this index holds
                        self._wrote_vectors()
                    report.repaired = repaired
                    return report
            if attempt == 2:
                raise IndexDamagedError(f"the index in {self.state_dir} does not hold what its catalog says even "
                                        f"after it was made again: {'; '.join(problems.values())}")
            self.repair(problems)
            repaired.update(problems)
        raise AssertionError("unreachable")

    def _sync(self, vaults: list[Vault] | None,
              progress: Callable[[int, int, int], None] | None) -> SyncReport:
        # said to readers until this sync ends (incomplete): a first index cut short has notes no
        # pending mark names, those it never reached
        self.catalog.set_meta("syncing", str(os.getpid()))
        started = time.perf_counter()
        vaults = list(vaults) if vaults is not None else self.vaults()
        report = SyncReport()
        scanned: dict[str, ScannedFile] = {}
        known: dict[str, FileState] = {}
        imported: dict[str, set[str]] = {}  # vault -> the files CLAUDE.md files import into it, as last indexed
        renamed = self._renamed(vaults)
        for vault in vaults:
            self.catalog.put_vault(vault)
        self.catalog.scope = self.scopes()  # vaults new to the index may join chains
        every = self.imported_all()
        for vault in vaults:
            if not vault.root.is_dir():
                log.warning("vault %s: directory %s not found; its notes are kept as last indexed", vault.name, vault.root)
                report.missing.append(vault.name)
                continue
            imported[vault.name] = set(every.get(vault.name, ()))
            scanned.update(self._note_files(vault, imported[vault.name]))
            known.update(self.catalog.files(vault.name))
            for old in renamed.get(vault.name, []):  # gone under the old name: moved, vectors reused
                known.update(self.catalog.files(old))
        cfg = self.settings.index
        pipeline = f"{PIPELINE_VERSION}:{cfg.chunk_chars}:{cfg.preview_chars}"
        redo: set[str] = set()
        if self.catalog.get_meta("pipeline") != pipeline:  # every note is read again
            redo = set(scanned)
            for name in report.missing:  # when its vault is back
                self.catalog.mark_pending(self.catalog.files(name))
        vault_names = {v.name for v in vaults} - set(report.missing)
        pending = {k for k in self.catalog.pending() if k.split(":", 1)[0] in vault_names}
        self._reconcile(scanned, known, pending | redo, report, progress, full=True)
        self._follow_imports([v for v in vaults if v.name in imported], imported, report)
        for new, olds in renamed.items():
            for old in olds:
                if not self.catalog.files(old):
                    self.catalog.drop_vault(old)
                    log.info("vault %s is now named %s (same directory): its notes moved to the new name", old, new)
        self.catalog.set_meta("pipeline", pipeline)
        self.catalog.set_meta("syncing", "")
        report.seconds = time.perf_counter() - started
        return report

    def _renamed(self, vaults: list[Vault]) -> dict[str, list[str]]:
        """Known vaults that are another name for the directory of one of `vaults` (the config
        renamed it): new name -> old names. Left alone, each note was answered twice."""
        being = {v.name for v in vaults}
        roots = {os.path.realpath(v.root): v.name for v in vaults if v.root.is_dir()}
        out: dict[str, list[str]] = {}
        for known in self.catalog.vaults():
            new = roots.get(os.path.realpath(known.root))
            if known.name not in being and new is not None:
                out.setdefault(new, []).append(known.name)
        return out

    @_writes
    def update(self, vault: Vault, paths: set[str]) -> SyncReport:
        """Bring the index in line with some vault-relative paths: files or directories, existing
        or gone. What to do is decided by looking at the disk, never at how the change was seen.
        Nothing is done while the vault's directory is missing (as in sync)."""
        assert self.writable, "update needs a writable index"
        started = time.perf_counter()
        report = SyncReport()
        if not vault.root.is_dir():
            report.missing.append(vault.name)
            return report
        # a CLAUDE.md may import a file of another vault (`@~/.claude/my-project.md`)
        vaults = [vault, *(v for v in self.served() if v.name != vault.name and v.root.is_dir())]
        every = self.imported_all()
        imported = {v.name: set(every.get(v.name, ())) for v in vaults}
        self._update(vault, paths, imported[vault.name], report)
        self._follow_imports(vaults, imported, report)
        report.seconds = time.perf_counter() - started
        return report

    def _update(self, vault: Vault, paths: set[str], imported: set[str], report: SyncReport) -> None:
        cfg = self.settings.index
        scanned: dict[str, ScannedFile] = {}
        known: dict[str, FileState] = {}
        for rel in paths:
            full = os.path.join(str(vault.root), rel)
            if os.path.isdir(full):
                scanned.update(self._note_files(vault, {p for p in imported if is_under(p, rel)}, under=rel))
            elif (is_note_path(vault, rel, cfg.include, cfg.exclude) or rel in imported) and vault.owns(rel):
                s = stat_file(vault, rel, cfg.include, cfg.exclude)
                if s is not None:
                    scanned[s.key] = s
            known.update(self.catalog.files(vault.name, under=rel))
        scope = set(scanned) | set(known)
        pending = {k for k in self.catalog.pending() if k in scope}
        self._reconcile(scanned, known, pending, report, None)

    # -------------------------------------------------------------- imports

    def imported_all(self) -> dict[str, dict[str, str]]:
        """The files the CLAUDE.md files of every vault import (`@docs/git.md`), directly or not,
        as last indexed: vault -> path -> the note that imports it (imports.py). Each is a note
        of the vault that holds it."""
        if not self.settings.index.follow_imports:
            return {}
        return imports.imported(self.vaults(), self.catalog.imports(), self.settings.index.exclude)

    def imported(self, vault: Vault) -> dict[str, str]:
        """The files imported into `vault` (imported_all)."""
        return self.imported_all().get(vault.name, {})

    def note_files(self, vault: Vault) -> dict[str, ScannedFile]:
        """Every note file of a vault on disk: the include globs' and the imported ones."""
        return self._note_files(vault, set(self.imported(vault)))

    def _note_files(self, vault: Vault, imported: set[str], under: str = "") -> dict[str, ScannedFile]:
        cfg = self.settings.index
        found = scan_vault(vault, cfg.include, cfg.exclude, under=under)
        for rel in sorted(imported):
            if f"{vault.name}:{rel}" not in found and (s := stat_file(vault, rel, cfg.include, cfg.exclude)):
                found[s.key] = s
        return found

    def _say_imports_outside(self, note: Note, s: ScannedFile) -> None:
        """Claude Code reads a file a CLAUDE.md imports from outside the vault, and a search here
        cannot find it: said once each time the CLAUDE.md is read."""
        if not note.imports or not self.settings.index.follow_imports:
            return
        vaults = self.vaults()
        vault = next((v for v in vaults if v.name == note.vault), None)
        for raw in imports.outside(vaults, vault, note.path, note.imports) if vault is not None else ():
            log.warning("%s imports %s, which is in no vault: not indexed (add its directory as a vault to "
                        "search it)", s.abspath, raw)

    def _follow_imports(self, vaults: list[Vault], before: dict[str, set[str]], report: SyncReport) -> None:
        """Notes just indexed may import other files than `before` (vault -> paths; a CLAUDE.md
        edited, or read for the first time): index the files imported into `vaults` now and
        drop those no longer imported, one hop at a time."""
        cfg = self.settings.index
        for _ in range(imports.MAX_DEPTH + 1):
            every, changed = self.imported_all(), False
            for vault in vaults:
                now, was = set(every.get(vault.name, ())), before.get(vault.name, set())
                if now != was:
                    # a file the globs match was read by this sync already (counted once: a first
                    # index said "3 files: 2 added, 1 unchanged" of 2 files)
                    fresh = {rel for rel in now ^ was if not is_note_path(vault, rel, cfg.include, cfg.exclude)}
                    if fresh:
                        self._update(vault, fresh, now, report)
                    before[vault.name], changed = now, True
            if not changed:
                return

    def _reconcile(self, scanned: dict[str, ScannedFile], known: dict[str, FileState], redo: set[str],
                   report: SyncReport, progress: Callable[[int, int, int], None] | None,
                   full: bool = False) -> None:
        """Index what changed among `scanned`, drop what is `known` but gone; `redo` keys are
        re-read whatever their stat says (pending after a crash, or a new pipeline). `full`
        re-derives supersession for every note, whatever changed, unless the chains were last
        derived whole under the same scopes and rules (Catalog.chains_derived): an index written
        by an older vaultmem, or before a vault joined a chain scope, could be left with chains
        no stat reveals. Re-deriving 50,000 unchanged notes' chains took ~0.35 s of a restart."""
        report.files += len(scanned)
        todo = [scanned[k] for k in sorted(k for k, s in scanned.items() if k in redo or k not in known
                                           or (known[k].size, known[k].mtime_ns) != (s.size, s.mtime_ns))]
        gone = sorted(k for k in set(known) | (redo - set(scanned)) if k not in scanned)
        report.unchanged += len(scanned) - len(todo)
        touched = len(todo) + len(gone)
        # each batch's commit re-derives the chains its files were and are in; a large change
        # (or a full reconcile) re-derives them all in the last, which is cheaper
        whole = full or touched >= 1000 or self.catalog.size() <= touched * 4
        batch = max(1, self.settings.index.batch_files)
        added: dict[str, list[str]] = {}  # digest -> keys of new files with those bytes
        starts = range(0, len(todo), batch) or [0]
        wrote = False
        # many notes to read (a first index, a vault added): searchable by words first, the
        # vectors embedded afterwards (fill_vectors)
        later = bool(self.vectors_later_at) and len(todo) >= self.vectors_later_at
        if progress and todo:
            progress(0, len(todo), 0)  # how much there is to read, before the first batch's minute
        for i in starts:  # what is gone leaves in the last batch's commit: a move is one commit,
            # so a reader never finds the note under both paths, nor under neither
            last = i == starts[-1]
            wrote = self._sync_batch(todo[i : i + batch], known, redo, report, added, gone if last else [],
                                     "all" if whole and last else "touched", later)
            if progress and todo:
                progress(min(i + batch, len(todo)), len(todo), report.chunks_embedded)
        if gone:
            report.moved = _moves({k: known[k].hash for k in gone if k in known}, added)
        if full and not wrote and not self.catalog.chains_derived():
            self.catalog.recompute_supersession()
        if touched or full:
            if self.settings.index.mark_superseded and not self._marking:
                self._mark_superseded(report)

    def _mark_superseded(self, report: SyncReport) -> None:
        """The user turned `mark_superseded` on: make each note's `superseded_by` frontmatter
        line say what the catalog says (the superseding note's vault-relative path, or no line
        when the note is current), then re-read the notes written so the index matches them.
        A note edited since it was indexed waits for the next pass; one that cannot be edited
        safely (writing.not_rewritable, or frontmatter set_frontmatter_key refuses) is left
        alone and said once, until its content changes."""
        vaults = {v.name: v for v in self.vaults()}
        edits = []
        for row in self.catalog.marks():
            if row.vault not in vaults:
                continue
            if self._unmarkable.get(row.key) == row.hash:
                continue
            path = vaults[row.vault].root / row.path
            try:
                why = writing.not_rewritable(os.lstat(path))
                data = path.read_bytes()
            except OSError:
                continue
            if file_digest(data) != row.hash:
                continue
            new = writing.set_frontmatter_key(data, "superseded_by", row.want)
            if new is None:
                why = "its frontmatter is not plain YAML at the top of the file, or it is not UTF-8"
            if why or new is None:
                self._unmarkable[row.key] = row.hash
                log.warning("mark_superseded: leaving %s as it is: %s", path, why)
                continue
            edits.append((row, path, data, new))
        if not edits:
            return
        # pending first: killed after a write, the next start re-reads the note even though its
        # size and mtime (both kept) may match the catalog
        self.catalog.mark_pending([row.key for row, _, _, _ in edits])
        written: dict[str, set[str]] = {}
        for row, path, data, new in edits:
            written.setdefault(row.vault, set()).add(row.path)
            report.marked += writing.rewrite_note(path, data, new)
        writing.sync_dirs({path.parent for _, path, _, _ in edits})
        self._marking = True
        try:
            for name, paths in written.items():
                self.update(vaults[name], paths)
        finally:
            self._marking = False

    def _read(self, s: ScannedFile) -> tuple[bytes | None, str | None]:
        if s.problem is not None:
            return None, s.problem
        if s.size > self.settings.index.max_file_bytes:
            return None, f"file too large ({s.size} bytes > max_file_bytes {self.settings.index.max_file_bytes})"
        try:
            with open(s.abspath, "rb") as f:
                return f.read(self.settings.index.max_file_bytes + 1), None
        except OSError as err:
            return None, f"cannot read: {err.strerror}"

    def _sync_batch(self, files: list[ScannedFile], known: dict, pending: set[str], report: SyncReport,
                    added: dict[str, list[str]], gone: list[str], chains: str, vectors_later: bool = False) -> bool:
        """Read, embed and write `files`, and remove the `gone` keys, in one commit of each
        store; the catalog's also re-derives supersession (`chains`, as Catalog.write). With
        `vectors_later`, notes with text to embed are written without vectors and listed for
        fill_vectors. Returns whether anything was written."""
        cfg = self.settings.index
        notes: list[tuple[Note, ScannedFile, str]] = []
        skipped: list[tuple[str, str, str, int, int, str | None, str]] = []
        same: list[tuple[str, int, int]] = []
        for s in files:
            data, reason = self._read(s)
            digest = file_digest(data) if data is not None else None
            prev = known.get(s.key)
            if prev is not None and digest is not None and prev.hash == digest and s.key not in pending:
                same.append((s.key, s.size, s.mtime_ns))  # same bytes, new mtime
                report.unchanged += 1
                continue
            if data is not None and digest is not None:
                try:
                    note = parse_note(s.vault, s.path, data, chunk_chars=cfg.chunk_chars,
                                      preview_chars=cfg.preview_chars)
                except Unreadable as err:
                    reason = str(err)
                except Exception as err:  # a bug of ours must cost this one note, not every note
                    log.exception("cannot parse %s; please report this vaultmem bug with the file", s.abspath)
                    reason = f"could not be parsed ({type(err).__name__}: {err})"
                else:
                    for e in note.errors:
                        log.warning("%s: %s", s.abspath, e)
                    self._say_imports_outside(note, s)
                    notes.append((note, s, digest))
                    if prev is None:
                        report.added += 1
                        added.setdefault(digest, []).append(s.key)
                    else:
                        report.updated += 1
                    continue
            reason = reason or "unreadable"
            log.warning("skipping %s: %s", s.abspath, reason)
            report.problems[s.key] = reason
            report.skipped += 1
            skipped.append((s.key, s.vault, s.path, s.size, s.mtime_ns, digest, reason))
        keys = [n.key for n, _, _ in notes] + [k[0] for k in skipped]
        if not (keys or gone or same):
            return False
        hashes: list[list[str]] = []
        later: set[str] = set()
        if keys or gone:  # same bytes alone change the catalog only (an mtime orders an undated chain)
            self.catalog.mark_pending(keys + gone)

            texts = [[embed_text(n, c) for c in n.chunks] for n, _, _ in notes]
            hashes = [[content_hash(t) for t in ts] for ts in texts]
            wanted = {h for hs in hashes for h in hs}
            # a first index, its vectors left for later, has no vector table yet: nothing in one to
            # reuse or remove, and LanceDB (0.5 s to import, and its event loop's thread beside
            # the parsing) is opened once the notes are searchable by words (Writer._begin_fill)
            bare = vectors_later and not self.vectors_open and not integrity.vector_files(self.state_dir / "lance")
            have = {} if bare else self.vectors.vectors_for_hashes(wanted)
            missing = sorted(wanted - set(have))
            if missing and vectors_later:
                # searchable by words now; the vectors are filled in by fill_vectors
                gap = set(missing)
                later = {n.key for (n, _, _), hs in zip(notes, hashes) if gap.intersection(hs)}
                missing = []
                report.vectors_later += len(later)
            if missing:
                text_of = {h: t for ts, hs in zip(texts, hashes) for t, h in zip(ts, hs)}
                vecs = self.embedder.embed([text_of[h] for h in missing])
                have.update(zip(missing, vecs))
            report.chunks_embedded += len(missing)
            report.chunks_reused += sum(len(hs) for (n, _, _), hs in zip(notes, hashes) if n.key not in later) - len(missing)

            rows: list[tuple[str, str, str, np.ndarray]] = []
            self.fulltext.delete_notes(keys + gone)
            for (note, _, _), hs in zip(notes, hashes):
                ids = [chunk_id(note.key, c.ord) for c in note.chunks]
                self.fulltext.add_note(note, ids)
                if note.key not in later:  # a note has all its vectors or none
                    rows.extend((cid, note.key, h, have[h]) for cid, h in zip(ids, hs))
            self.fulltext.commit()
            if not bare:
                self.vectors.replace(set(keys) | set(gone), rows)
                self._wrote_vectors()
        self.catalog.write(
            [(n, s.size, s.mtime_ns, d, hs) for (n, s, d), hs in zip(notes, hashes)], skipped, gone, keys + gone,
            same, chains, unembedded=later)
        report.removed += len(gone)
        return True

    @_writes
    def fill_vectors(self, max_notes: int = 32) -> int:
        """Embed the vectors of up to `max_notes` notes written without them (in the order they
        were read, from what the catalog keeps of their chunks); returns how many got theirs.
        Crash-safe as a sync batch: the notes are pending while the vector table changes, so a
        fill cut short is redone by the next sync."""
        keys = self.catalog.unembedded(max_notes)
        if not keys:
            return 0
        records = self.catalog.notes(keys)
        chunks = [ch for ch in self.catalog.chunks_of(keys) if ch.note in records]
        text_of = {ch.hash: embed_text_of(ch.heading, ch.ord, ch.text, records[ch.note].topic, records[ch.note].summary)
                   for ch in chunks}
        have = self.vectors.vectors_for_hashes(set(text_of))
        missing = sorted(set(text_of) - set(have))
        if missing:
            have.update(zip(missing, self.embedder.embed([text_of[h] for h in missing])))
        self.catalog.mark_pending(keys)
        # added, nothing deleted: a note listed has no vectors (one a fill cut short added is
        # pending, and the sync that redoes it deletes them); one commit of the table, not two
        self.vectors.replace(set(), [(ch.id, ch.note, ch.hash, have[ch.hash]) for ch in chunks])
        self.catalog.embedded(keys)
        if not self.catalog.unembedded_count():
            self._wrote_vectors()  # the files as they are now (a check opens the table until then)
        return len(keys)

    def _fill_all(self) -> None:
        """Embed every note left without vectors (by a daemon stopped before it had)."""
        if total := self.catalog.unembedded_count():
            t = time.perf_counter()
            while self.fill_vectors(256):
                pass
            log.info("embedded the vectors of %d notes left without them in %.1f s", total, time.perf_counter() - t)

    @_writes
    def rebuild(self) -> None:
        """Forget everything indexed (not the vault list): the next sync re-reads every file."""
        self.repair({"fulltext": "", "vectors": ""}, say=False)
        self.catalog.clear()

    def incomplete(self) -> str | None:
        """Why answers from this index may miss notes or show old text (a reader's view), or
        None: a sync or an index of it is running in another process, or one was cut short
        (notes left pending, or a sync that never ended; `vaultmem index` finishes it)."""
        pending = len(self.catalog.pending())
        syncing = self.catalog.get_meta("syncing") or ""
        if not pending and not syncing:
            return None
        holder = _lock_holder(self.state_dir)
        if holder is not None:
            return (f"vaultmem (pid {holder}) is indexing {self.state_dir} right now: notes it has not reached yet are "
                    "missing or as they were")
        what = f"{pending} note(s) were left half-indexed" if pending else "notes may never have been read"
        return f"the last index of {self.state_dir} was cut short ({what}): `vaultmem index` finishes it"

    def status(self, vaults: list[Vault] | None = None) -> dict:
        """What the index holds, for `vaults` (default: those it serves)."""
        counts = self.catalog.counts()
        ident, dim = self.indexed_embedder() or embedder_identity(self.settings)
        return {
            "state_dir": str(self.state_dir),
            "vaults": self.vault_status(self.served() if vaults is None else vaults),
            **counts,
            "pending": len(self.catalog.pending()),
            "vectors_to_embed": self.catalog.unembedded_count(),  # notes searchable by words only, for now
            "embedder": ident,
            "dim": dim,
            "skipped_files": [{"key": r.key, "reason": r.reason} for r in self.catalog.skipped()],
        }


def _lock_holder(state_dir: Path) -> int | None:
    """The pid of a live process that holds the writer lock of `state_dir`, or None."""
    try:
        fd = os.open(state_dir / "writer.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # granted: no writer holds it
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(pid) if pid.isdigit() else -1
    finally:
        os.close(fd)  # and the shared lock with it
    return None


def _moves(gone: dict[str, str | None], added: dict[str, list[str]]) -> dict[str, str]:
    """Files that moved: a key gone and a key new in the same pass, with the same bytes. Only
    one-to-one matches count (two identical files moved at once are not told apart)."""
    by_digest: dict[str, list[str]] = {}
    for key, digest in gone.items():
        if digest is not None:
            by_digest.setdefault(digest, []).append(key)
    return {olds[0]: added[d][0] for d, olds in by_digest.items()
            if len(olds) == 1 and len(added.get(d, ())) == 1}


def print_progress(done: int, total: int, embedded: int) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = int(width * done / max(1, total))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files, {embedded} chunks embedded")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
