"""The operations of the memory habit, shared by the socket API (daemon.py) and the in-process
CLI (cli.py): query, tags, remember, forget, feedback, stats, inventory. Each takes a `Context` and a
request dict and returns a JSON-able response; neither caller re-implements any of them.

A Context says how to reach the index: `read(fn)` runs fn(index, searcher) where reads are
consistent (the daemon's read lock), `write(fn)` runs fn(writable index) where writes belong (the
daemon's writer thread, after which its reader sees the change). Notes are written only through
writing.py, and only by remember and forget --delete.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from . import writing
from .catalog import written_at
from .notes import parse_tags
from .agents import claude_home
from .config import Settings, Vault
from .errors import DiskFullError, IndexDamagedError, UsageError, VaultmemError
from .index import VaultIndex
from .query import Query, build_query, list_field, number_field, text_field
from .scan import is_note_path
from .search import Searcher
from .usage import Usage

T = TypeVar("T")
log = logging.getLogger("vaultmem.ops")


class Context:
    settings: Settings
    usage: Usage

    def read(self, fn: Callable[[VaultIndex, Searcher], T]) -> T:
        raise NotImplementedError

    def write(self, fn: Callable[[VaultIndex], T]) -> T:
        raise NotImplementedError

    def incomplete(self) -> str | None:
        """Why answers now may miss notes or show old text (an index running or cut short, a
        rebuild), said with them; None when they are whole."""
        return None

    def vaults(self, idx: VaultIndex) -> list[Vault]:
        """The vaults kept in line with their files (status shows them)."""
        return idx.served()

    def about(self, status: dict) -> None:
        """Add to a status answer what this context knows beyond the index (the daemon's
        process, watches, queue)."""

    def sync(self, rebuild: bool) -> dict:
        """A full reconcile now (`rebuild`: the index made again from nothing first); its
        SyncReport as a dict."""
        raise NotImplementedError

    def can_drop(self, names: list[str]) -> None:
        """Raise UsageError when the vaults `names` must not be dropped now."""


# ------------------------------------------------------------------ finding notes


def vault_for(vaults: list[Vault], name: str | None, cwd: str | None) -> Vault:
    """The vault named (by name or directory); else the one containing `cwd`; else the only one;
    else the user-wide one (Claude Code's own directory, ~/.claude, when it is a vault)."""
    if not vaults:
        raise UsageError("no vault is indexed yet: run `vaultmem index --vault DIR` first")
    if name:
        real = os.path.realpath(os.path.expanduser(name))
        for v in vaults:
            if v.name == name or str(v.root) == real:
                return v
        raise UsageError(f"vault {name}: not an indexed vault (known: {', '.join(v.name for v in vaults)})")
    if cwd:
        inside = [v for v in vaults if cwd == str(v.root) or cwd.startswith(str(v.root) + os.sep)]
        if inside:
            return max(inside, key=lambda v: len(str(v.root)))
    if len(vaults) == 1:
        return vaults[0]
    own = [v for v in vaults if v.is_claude_dir and v.root == claude_home().resolve()]
    if own:  # the user-wide memory (~/.claude), for what belongs to no project in the index
        return own[0]
    raise UsageError(f"several vaults are indexed and none holds {cwd or 'the working directory'}; name one "
                     f"with --vault ({', '.join(v.name for v in vaults)})")


def resolve_note(idx: VaultIndex, ref: str, cwd: str | None = None) -> str:
    """A note key from `vault:path`, an absolute or working-directory-relative file path, or a
    vault-relative path (unique across vaults). A file the path names from the working
    directory is the one meant, though another vault has a note at the same relative path."""
    vaults = idx.vaults()
    if not isinstance(ref, str) or "\x00" in ref or not ref.strip():
        raise UsageError("give a note as a path (a string)")
    ref = ref.strip()
    named: list[str] = []  # vault:path, or the file itself
    relative: list[str] = []  # the path in each vault
    name, _, rest = ref.partition(":")
    if rest and any(v.name == name for v in vaults):
        named.append(f"{name}:{rest.lstrip('/')}")
    full = ref if os.path.isabs(os.path.expanduser(ref)) else os.path.join(cwd or os.getcwd(), ref)
    full = os.path.realpath(os.path.expanduser(full))
    for v in vaults:
        if full.startswith(str(v.root) + os.sep):
            named.append(f"{v.name}:{Path(os.path.relpath(full, v.root)).as_posix()}")
        if not os.path.isabs(ref):
            relative.append(f"{v.name}:{Path(ref).as_posix()}")
    found = [k for k in dict.fromkeys(named) if k in idx.catalog.notes([k])] or \
        [k for k in dict.fromkeys(relative) if k in idx.catalog.notes([k])]
    if not found:
        raise UsageError(f"{ref}: no such note in the index (see `vaultmem status` for the vaults)")
    if len(found) > 1:
        raise UsageError(f"{ref} names a note in several vaults ({', '.join(found)}); write it as VAULT:PATH")
    return found[0]


def _path_of(key: str) -> str:
    return key.split(":", 1)[1]


# ------------------------------------------------------------------ query


def _query_of(ctx: Context, idx: VaultIndex, req: dict) -> Query:
    s = ctx.settings.search
    known = [(v.name, str(v.root)) for v in idx.vaults()]
    return build_query({k: v for k, v in req.items() if k != "op"}, s.k, s.mode, known)


def query(ctx: Context, req: dict) -> dict:
    def run(idx: VaultIndex, searcher: Searcher) -> dict:
        hits, info = searcher.search(_query_of(ctx, idx, req))
        out = {"ok": True, "hits": [h.to_json() for h in hits], **info}
        if why := ctx.incomplete():  # asked while the index read is the one that answered
            out["incomplete"] = why
        elif n := info.get("without_vectors"):
            out["incomplete"] = (f"{n:,} note{'s have' if n != 1 else ' has'} no vector yet, found by words "
                                 "only until the daemon has embedded them in the background (`vaultmem index` "
                                 "does it at once)")
        return out
    return ctx.read(run)


def tags(ctx: Context, req: dict) -> dict:
    """The tags of the notes that pass the request's filters (those of a query: vaults, kinds,
    tags, since, until, history, ...), with how many notes each finds, most first."""
    def run(idx: VaultIndex, searcher: Searcher) -> dict:
        found, passed = searcher.tag_counts(_query_of(ctx, idx, {**req, "text": ""}))
        return {"ok": True, "tags": found, "notes": passed}
    return ctx.read(run)


# ------------------------------------------------------------------ remember


def remember(ctx: Context, req: dict) -> dict:
    """Write a new note under the vault's memory directory and index it before answering.
    Request: topic, text, tags, kind, importance, vault, cwd."""
    topic = (text_field(req, "topic", "remember needs a topic (--topic)", one_line=True) or "").strip()
    text = text_field(req, "text", "remember needs the note's text (an argument, or - to read stdin)") or ""
    if not topic or not text.strip():
        raise UsageError("remember needs a topic and some text")
    if len(topic) > 200:
        raise UsageError("a topic is one line of at most 200 characters")
    tags = [t.strip().lstrip("#") for t in list_field(req, "tags")]
    kind = (text_field(req, "kind", one_line=True) or "").strip().lower() or None
    importance = number_field(req, "importance", 0.0, 1.0)
    cwd, vault_name = text_field(req, "cwd"), text_field(req, "vault", one_line=True)
    subdir = ctx.settings.memory.dir.strip("/")

    def run(idx: VaultIndex) -> dict:
        for v in ctx.settings.vaults:  # configured but never indexed: known from now on
            if v.name not in {k.name for k in idx.vaults()}:
                idx.catalog.put_vault(v)
        served = idx.served()
        try:  # named, or holding the working directory: any vault in the index
            vault = vault_for(idx.vaults(), vault_name, cwd)
        except UsageError:
            if vault_name:
                raise
            vault = vault_for(served, None, cwd)  # else the only one in the config
        if vault.name not in {v.name for v in served}:  # its later edits would never be read
            raise UsageError(f"vault {vault.name} is not in the config, so its notes are not kept up to date; "
                             "add it there, or name another with --vault; nothing written")
        if not vault.root.is_dir():  # unmounted: the note would hide under the mount point
            raise UsageError(f"vault {vault.name}: directory {vault.root} not found; nothing written")
        rel_dir = Path(subdir)
        if rel_dir.is_absolute() or ".." in rel_dir.parts:
            raise UsageError(f"memory dir {subdir!r} must be a path inside the vault")
        probe = (rel_dir / "x.md").as_posix()
        cfg = ctx.settings.index
        if not is_note_path(vault, probe, cfg.include, cfg.exclude):
            raise UsageError(f"notes written to {subdir}/ would not be indexed (see [index] include)")
        # the chain the note joins: its vault's, or its project's across vaults (supersession.Scopes)
        before = idx.catalog.topic_notes(topic, current_only=True, scope=idx.catalog.scope(vault.name, probe))
        when = dt.datetime.now().astimezone().replace(microsecond=0)
        rows = idx.catalog.notes(before)
        latest = max((written_at(r) for r in rows.values()), default=None)
        newest = max(rows.values(), key=written_at, default=None)
        note_tags, note_kind = tags, kind
        if newest is not None:  # a new version keeps the tags and kind of the one it supersedes, unless given
            declared = newest.meta
            note_tags = tags or list(parse_tags(declared.get("tags", declared.get("tag"))))  # as written, not #inline
            note_kind = kind or (newest.kind if "kind" in declared or "type" in declared else None)
        if latest is not None and when.timestamp() <= latest < when.timestamp() + 60:
            # the current note was written this very second (or a burst of remembers ran ahead
            # of the clock): a chain orders notes by date, so the new one is dated a second
            # after it rather than tie with it and lose on path. A note dated further ahead is
            # left current, and the answer says so.
            when = dt.datetime.fromtimestamp(math.floor(latest) + 1, when.tzinfo)
        body = writing.render(topic, text, tags=note_tags, kind=note_kind, importance=importance, when=when)
        stem = f"{writing.slug(topic)}-{when:%Y-%m-%d}"
        path = writing.same_note(vault.root / rel_dir, stem, body)  # a retry: written already
        if path is None:
            try:
                path = writing.write_new(vault.root / rel_dir, stem, body)
            except OSError as err:
                raise VaultmemError(f"cannot write a note in {vault.root / rel_dir}: {err.strerror or err}") from None
        rel = path.relative_to(vault.root).as_posix()
        try:
            idx.update(vault, {rel})
        except DiskFullError as err:
            raise DiskFullError(f"the note is written ({path}), but the index cannot take it: {err}; it is indexed "
                                "once there is room (the daemon retries by itself; else `vaultmem index`), and "
                                "`remember` again does not write it twice") from None
        key = f"{vault.name}:{rel}"
        rows = idx.catalog.notes(before + [key])
        if key not in rows:
            raise VaultmemError(f"wrote {path} but could not index it")
        superseded = [k for k in before if rows.get(k) is not None and rows[k].superseded_by == key]
        log.info("remembered %s%s", key, f" (supersedes {', '.join(superseded)})" if superseded else "")
        return {"ok": True, "path": rel, "vault": vault.name, "file": str(path), "topic": topic,
                "superseded": [_path_of(k) for k in superseded],
                "current": (newer := rows[key].superseded_by) is None,
                "superseded_by": _path_of(newer) if newer else None}
    return ctx.write(run)


# ------------------------------------------------------------------ forget


def _targets(idx: VaultIndex, req: dict) -> list[str]:
    paths, topic = list_field(req, "path"), text_field(req, "topic", one_line=True)
    if bool(paths) == bool(topic):
        raise UsageError("forget needs a note path or a topic (one of them)")
    if paths:
        cwd = text_field(req, "cwd")
        return [resolve_note(idx, p, cwd) for p in paths]
    vault_name = text_field(req, "vault", one_line=True)
    vault = vault_for(idx.vaults(), vault_name, None).name if vault_name else None
    assert topic is not None  # a path or a topic, checked above
    keys = idx.catalog.topic_notes(topic, vault)
    if not keys:
        raise UsageError(f"no note has the topic {req['topic']!r}")
    return keys


def forget(ctx: Context, req: dict) -> dict:
    """Retire notes (recorded in vaultmem's state; the files stay), restore retired ones, or
    delete the files. Request: path (one or a list) or topic [+ vault]; action retire | restore
    | delete; delete needs yes=true; dry_run lists the notes without acting."""
    action = req.get("action") or "retire"
    if not isinstance(action, str) or action not in ("retire", "restore", "delete"):
        raise UsageError(f"forget action must be retire, restore or delete, not {action!r}")
    keys = ctx.read(lambda idx, _: _targets(idx, req))
    out: dict[str, Any] = {"ok": True, "action": action, "notes": keys}
    if req.get("dry_run"):
        return out
    if action == "retire":
        out["changed"] = ctx.usage.retire(keys, reason=text_field(req, "reason") or "")
    elif action == "restore":
        out["changed"] = ctx.usage.restore(keys)
    else:
        if req.get("yes") is not True:
            raise UsageError(f"deleting {len(keys)} file(s) needs confirmation (yes=true, or --yes)")

        def run(idx: VaultIndex) -> list[str]:
            roots = {v.name: v for v in idx.vaults()}
            done: dict[str, set[str]] = {}
            for key in keys:
                name, rel = key.split(":", 1)
                try:
                    writing.delete(roots[name].root / rel)
                except FileNotFoundError:
                    pass
                except OSError as err:
                    raise VaultmemError(f"cannot delete {roots[name].root / rel}: {err.strerror or err}") from None
                done.setdefault(name, set()).add(rel)
            for name, rels in done.items():
                idx.update(roots[name], rels)
            return keys
        out["changed"] = ctx.write(run)
        ctx.usage.restore(keys)
    if out["changed"]:
        log.info("%s %s", {"retire": "retired", "restore": "restored", "delete": "deleted"}[action],
                 ", ".join(out["changed"]))
    return out


# ------------------------------------------------------------------ feedback and stats


def feedback(ctx: Context, req: dict) -> dict:
    if not isinstance(req.get("useful"), bool):
        raise UsageError("feedback needs useful: true or false (--useful or --useless)")
    path, cwd, task = text_field(req, "path", "feedback needs the note's path"), text_field(req, "cwd"), \
        text_field(req, "task", one_line=True)
    key = ctx.read(lambda idx, _: resolve_note(idx, path, cwd))
    weight = ctx.usage.feedback(key, req["useful"], ctx.settings.search.feedback_alpha, task)
    log.info("feedback on %s: %s (weight now %.3f)", key, "useful" if req["useful"] else "useless", weight)
    factor = 1.0 + ctx.settings.search.feedback_weight * (2.0 * weight - 1.0)
    return {"ok": True, "note": key, "feedback": round(weight, 4), "feedback_factor": round(factor, 4)}


SHOWN_MAX = 100


def shown(ctx: Context, req: dict) -> dict:
    """Count notes as retrieved that a client showed without a query of its own (the
    session-start digest, the notes added to a prompt), so that `stats` and the inventory's
    "never retrieved" see them.
    Keys are note keys (`vault:path`) as hits give them; unknown ones are ignored."""
    keys = list_field(req, "notes")
    if len(keys) > SHOWN_MAX:
        raise UsageError(f"shown takes at most {SHOWN_MAX} notes")
    known = ctx.read(lambda idx, _: set(idx.catalog.notes(keys)))
    got = [k for k in dict.fromkeys(keys) if k in known]
    ctx.usage.record([(k, 0.0) for k in got])
    return {"ok": True, "recorded": len(got)}


def stats(ctx: Context, req: dict) -> dict:
    """Retrieval counts, feedback and retirement per note (all indexed notes, or those named),
    and, with a task, that task's attribution rows."""
    paths, cwd = list_field(req, "paths"), text_field(req, "cwd")
    task = req.get("task")
    if task is not None and not isinstance(task, str):
        raise UsageError("task must be a string")

    def run(idx: VaultIndex, _: Searcher) -> tuple[list[str], dict]:
        if paths:
            keys = [resolve_note(idx, p, cwd) for p in paths]
        else:
            keys = [r.key for r in idx.catalog.all_notes()]
        return keys, idx.catalog.notes(keys)
    keys, rows = ctx.read(run)
    got = ctx.usage.retrievals(keys)
    fb = ctx.usage.feedback_counts()
    retired = ctx.usage.retired()
    notes: list[dict[str, Any]] = []
    for key in keys:
        count, last = got.get(key, (0, None))
        weight, useful, useless = fb.get(key, (None, 0, 0))
        row = rows.get(key)
        notes.append({"note": key, "retrieved": count, "last_retrieved": _iso(last), "feedback": weight,
                      "useful": useful, "useless": useless, "retired": key in retired,
                      "current": row is not None and row.superseded_by is None and key not in retired})
    notes.sort(key=lambda n: (-n["retrieved"], n["note"]))
    out: dict[str, Any] = {"ok": True, "since": _iso(ctx.usage.started), "notes": notes,
                           "never_retrieved": sum(1 for n in notes if not n["retrieved"])}
    if task is not None:
        out["attribution"] = ctx.usage.attribution(task or None)
    return out


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))


# ------------------------------------------------------------------ status and reindex


def status(ctx: Context, req: dict) -> dict:
    """What the index holds (notes, chunks, vaults, the embedder, files skipped and why), and
    what the context adds to it (the daemon: its process, watches, queue and last reconcile)."""
    out = {"ok": True, **ctx.read(lambda idx, _: idx.status(ctx.vaults(idx)))}
    ctx.about(out)
    out["incomplete"] = ctx.incomplete()
    return out


def reindex(ctx: Context, req: dict) -> dict:
    """A full reconcile now; with "rebuild": true, from scratch; with "drop": [names], those
    vaults' notes taken out of the index instead. Answers when done, with the report."""
    drop = req.get("drop")
    if drop:
        if not isinstance(drop, list) or not all(isinstance(n, str) for n in drop):
            raise UsageError("drop must be a list of vault names")
        ctx.can_drop(drop)
        result = ctx.write(lambda idx: idx.drop_vaults(drop).__dict__)
    else:
        result = ctx.sync(bool(req.get("rebuild")))
    return {"ok": True, "report": {k: v for k, v in result.items() if k not in ("problems", "summary")},
            "problems": result.get("problems", {})}


# ------------------------------------------------------------------ inventory


def inventory(ctx: Context, req: dict) -> dict:
    from .inventory import take

    return {"ok": True, **ctx.read(lambda idx, _: take(idx, ctx.usage, ctx.settings, req))}


# ------------------------------------------------------------------ in this process


@contextlib.contextmanager
def _catalog_pages(settings: Settings):
    """A page of the catalog gone bad (SQLite reads a page only when a query reaches it; a
    writer checks them all when it opens: integrity.catalog_problem) is said in one line."""
    try:
        yield
    except sqlite3.DatabaseError as err:
        raise IndexDamagedError(f"the catalog in {settings.state_dir} is damaged ({err}); `vaultmem index` moves it "
                                "aside and makes the index again from the notes") from None


class LocalContext(Context):
    """The index opened in this process (the CLI without a daemon). Opened on first use, for
    writing if the first operation writes; `on_open` is called once it is open."""

    def __init__(self, settings: Settings, on_open: Callable[[], None] | None = None):
        self.settings = settings
        self.index: VaultIndex | None = None
        self.searcher: Searcher | None = None
        self._usage: Usage | None = None
        self._on_open = on_open

    @property
    def usage(self) -> Usage:  # type: ignore[override]
        if self._usage is None:
            self._usage = Usage(self.settings.state_dir)
        return self._usage

    def open(self, writable: bool) -> VaultIndex:
        if self.index is not None and (self.index.writable or not writable):
            return self.index
        if self.index is not None:
            self.index.close()
        self.index = VaultIndex(self.settings, writable=writable, verify=True)
        self.searcher = Searcher(self.index, self.usage)
        if self._on_open is not None:
            self._on_open()
            self._on_open = None
        return self.index

    def read(self, fn):
        with _catalog_pages(self.settings):
            idx = self.open(False)
            return fn(idx, self.searcher)

    def write(self, fn):
        with _catalog_pages(self.settings):
            return fn(self.open(True))

    def incomplete(self) -> str | None:
        return self.open(False).incomplete()

    def sync(self, rebuild: bool) -> dict:
        from .index import print_progress

        def run(idx: VaultIndex) -> dict:
            if rebuild:
                idx.rebuild()
            return idx.sync(idx.served(), progress=print_progress).__dict__
        return self.write(run)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        if self._usage is not None:
            self._usage.close()


OPS: dict[str, Callable[[Context, dict], dict]] = {
    "query": query, "remember": remember, "forget": forget, "feedback": feedback, "stats": stats,
    "inventory": inventory, "shown": shown, "tags": tags, "status": status, "reindex": reindex,
}
WRITES = {"remember", "forget", "reindex"}  # ops that may change notes (opened for writing up front)
