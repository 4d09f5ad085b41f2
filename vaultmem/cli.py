"""The `vaultmem` command line: what each command does with its options (parser.py holds the
options and their help), its output, and its exit code.

Client commands (query, status, reindex, remember, forget, feedback, stats, inventory) talk to the daemon over its socket when one runs;
that path imports nothing heavier than the standard library (client.py, query.py, config.py),
so a fresh `vaultmem query` answers in milliseconds. Without a daemon they open the index in
this process and say so on stderr. Engines are imported inside the functions that need them.

Exit codes: 0 success (query: at least one hit), 1 query found nothing / inventory found
something / forget declined, 2 usage or config error, 3 no index yet, 4 embedder mismatch
(reindex), 5 embedder failure.

About 680 lines: one short function per command (thirteen of them) and the output each prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from . import logs
from .errors import DiskFullError, IndexBusy, IndexDamagedError, UsageError, VaultmemError, is_disk_full
from .parser import build_parser, unknown_options


def _filters_of(args: argparse.Namespace) -> dict[str, Any]:
    """The request fields of `parser.filter_options` and --vault, those given; a bad date is a usage
    error before anything is opened."""
    from .query import parse_moment

    for moment in (args.since, args.until):
        parse_moment(moment)
    opts = {"tags": args.tag, "any_tags": args.any_tag, "kinds": args.kind, "topic": args.topic,
            "vaults": args.vault, "path": args.path, "history": args.history, "since": args.since,
            "until": args.until, "where": args.where}
    return {k: v for k, v in opts.items() if v not in (None, [], False)}


def _backend(args: argparse.Namespace, settings=None, patience: float = 1.0):
    from .backend import Backend

    settings = settings or _settings(args)
    return Backend(settings, socket=getattr(args, "socket", None), no_daemon=getattr(args, "no_daemon", False),
                   explicit_state_dir=bool(args.state_dir or os.environ.get("VAULTMEM_STATE_DIR")), quiet=args.quiet,
                   patience=patience)


def _settings(args: argparse.Namespace, vaults: list[str] | None = None):
    from .config import resolve

    flags: dict[str, Any] = {"config": args.config, "state_dir": args.state_dir, "debug": args.debug}
    if vaults:
        flags["vaults"] = vaults
    return resolve(flags)


# ------------------------------------------------------------------ commands


def cmd_index(args: argparse.Namespace) -> int:
    from .index import VaultIndex, print_progress

    settings = _settings(args, vaults=args.vault)
    for v in settings.vaults:
        if not v.root.is_dir():
            raise UsageError(f"vault directory not found: {v.root}")
    try:
        writer = VaultIndex(settings, writable=True)
    except IndexBusy as busy:
        return _index_through_daemon(args, settings, busy)
    with writer as idx:
        vaults = idx.served()
        if not vaults:
            raise UsageError("no vault given: pass --vault DIR (or set vaults in the config file)")
        if args.rebuild:
            idx.rebuild()
        else:
            idx.check_embedder()
        report = idx.sync(vaults, progress=None if args.quiet else print_progress)
        if report.changes >= settings.index.batch_files:
            idx.optimize()  # as the daemon does after a bulk load: compaction (and the ANN index)
    if report.moved:
        from .usage import Usage

        usage = Usage(settings.state_dir)
        try:
            usage.follow(report.moved)
        finally:
            usage.close()
    if args.json:
        print(json.dumps({**report.__dict__, "vaults": [v.name for v in vaults]}, ensure_ascii=False))
    elif not args.quiet:
        for key, reason in sorted(report.problems.items()):
            print(f"skipped {key}: {reason}", file=sys.stderr)
        print(f"indexed {', '.join(v.name for v in vaults)}: {report.summary()}")
    return 0


def _index_through_daemon(args: argparse.Namespace, settings, busy: IndexBusy) -> int:
    """`vaultmem index` while the daemon keeps this index: it reconciles (or rebuilds) for us
    when it watches every vault asked for; a vault it does not watch needs the config and a
    reload, which is said. Anything else holding the lock: `busy` as it was."""
    from .client import DaemonUnavailable, call, socket_path
    from .config import default_config_path

    sock = socket_path(None, settings.daemon.socket, settings.state_dir)
    try:
        st = call(sock, {"op": "status"}, timeout=10)
    except (DaemonUnavailable, OSError, ValueError):
        raise busy from None
    if not st.get("ok") or Path(st.get("state_dir", "")) != settings.state_dir or st.get("pid") != busy.holder:
        raise busy
    watched = {Path(v["root"]) for v in st["vaults"] if v.get("configured", True)}
    missing = [v for v in settings.vaults if v.root not in watched]
    if missing:
        config = settings.config_file or default_config_path()
        raise UsageError(
            f"the daemon (pid {st['pid']}) keeps this index and does not watch "
            f"{', '.join(f'{v.root}' for v in missing)}: add {'it' if len(missing) == 1 else 'them'} under [vaults] in {config} "
            f"(e.g. {missing[0].name} = \"{missing[0].root}\"), then `systemctl --user reload vaultmem` "
            f"(or `kill -HUP {st['pid']}`)")
    if not args.quiet:
        print(f"the daemon (pid {st['pid']}) keeps this index: it {'rebuilds' if args.rebuild else 'reconciles'} it",
              file=sys.stderr)
    out = call(sock, {"op": "reindex", "rebuild": bool(args.rebuild)})
    if not out.get("ok"):
        raise VaultmemError(out.get("error") or "the daemon could not reindex")
    if args.json:  # as `index --json` prints it in process
        print(json.dumps({**out["report"], "problems": out.get("problems", {}),
                          "vaults": [v["name"] for v in st["vaults"] if v.get("configured", True)],
                          "daemon_pid": st["pid"]}, ensure_ascii=False))
    else:
        _print_reindex(args, out)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from .query import parse_half_life, parse_moment, phrase_absent

    settings = _settings(args)
    parse_half_life(args.half_life)  # a bad flag is a usage error before anything is opened
    parse_moment(args.as_of)
    filters = _filters_of(args)
    if args.k is not None and args.k < 1:
        raise UsageError("-k must be at least 1")
    if args.batch and args.text:
        raise UsageError("give either query text or --batch FILE, not both")
    text = " ".join(args.text).strip()  # `query ""` is no query, as `query` is
    if not args.batch and not text and not any(v for k, v in filters.items() if k not in ("any_tags", "history")):
        raise UsageError("nothing to search for: give query text, a filter to list notes newest first "
                         "(--tag, --kind, --topic, --path, --vault, --since, --until, --where), or --batch FILE")
    opts = {"k": args.k, "mode": args.mode, "explain": args.explain, "half_life": args.half_life,
            "as_of": args.as_of, "task": args.task, "min_relevance": args.min_relevance}
    opts = {**filters, **{k: v for k, v in opts.items() if v not in (None, [], False)}}
    if args.no_record:
        opts["record"] = False
    backend = _backend(args, settings)
    try:
        if args.batch:
            return _run_batch(args.batch, opts, backend)
        out = backend.request({"op": "query", **opts, "text": " ".join(args.text)})
    finally:
        if not args.batch:
            backend.close()
    if out.get("incomplete") and not args.quiet:
        print(f"vaultmem: {out['incomplete']}", file=sys.stderr)
    if args.json:
        if out.get("phrase_absent") and not args.quiet:
            print(f"vaultmem: {phrase_absent(out['phrase_absent'])}", file=sys.stderr)
        print(json.dumps({"hits": out["hits"], "took_ms": out["took_ms"],
                          **{k: out[k] for k in ("indexing", "incomplete", "phrase_absent") if out.get(k)}},
                         ensure_ascii=False))
    else:
        if out.get("phrase_absent") and not args.quiet:
            print(f"vaultmem: {phrase_absent(out['phrase_absent'])}", file=sys.stderr)
        _print_hits(out["hits"], out["took_ms"], out.get("unknown_words", []), args.quiet or out.get("phrase_absent"),
                    listed=not " ".join(args.text).strip())
    return 0 if out["hits"] else 1


def _run_batch(path: str, opts: dict, backend) -> int:
    """One JSON result line per query line. A line that cannot be run gets an `error` object in
    its place and the batch goes on (exit 0: the results are all there); stderr says how many."""
    failed: list[str] = []
    try:
        try:
            stream = sys.stdin.buffer if path == "-" else open(path, "rb")
        except OSError as err:
            raise UsageError(f"cannot read batch file {path}: {err.strerror or err}") from None
        with stream:
            for n, raw in enumerate(stream, 1):
                try:  # each line decoded alone: one bad line is one error line, not a traceback
                    line = raw.decode("utf-8-sig" if n == 1 else "utf-8").strip()
                except UnicodeDecodeError:
                    line = None
                if line == "":
                    continue
                try:
                    if line is None:
                        raise UsageError("not UTF-8 text")
                    if line.startswith("{"):
                        item = json.loads(line)
                        if not isinstance(item, dict):
                            raise UsageError("a JSON line must be an object")
                        req = {**opts, **{k.replace("-", "_"): v for k, v in item.items()}}
                    else:
                        req = {**opts, "text": line}
                    out = backend.request({**req, "op": "query"})
                    out = {"hits": out["hits"], "took_ms": out["took_ms"]}
                except (VaultmemError, ValueError, TypeError) as err:
                    out = {"error": f"line {n}: {err}", "hits": []}
                    failed.append(out["error"])
                print(json.dumps(out, ensure_ascii=False), flush=True)
    finally:
        backend.close()
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        print(f"vaultmem: {len(failed)} batch line(s) could not be run: {failed[0]}{more}", file=sys.stderr)
    return 0


def _print_hits(hits: list[dict], took_ms: float, unknown: Sequence[str] = (), quiet: bool = False,
                listed: bool = False) -> None:
    """Hits for a reader; `listed`: a listing by filters (newest first), whose scores are all 0
    and say nothing."""
    tty = sys.stdout.isatty()
    bold = (lambda s: f"\033[1m{s}\033[0m") if tty else (lambda s: s)
    if unknown and not quiet:
        words = ", ".join(f'"{w}"' for w in unknown)
        print(f"no note has {words}; looked up by similar spelling", file=sys.stderr)
    if not hits:
        if not quiet:
            print("no matching notes", file=sys.stderr)
        return
    for i, h in enumerate(hits, 1):
        state = ("current" if h["current"] else "retired" if h.get("retired")
                 else f"superseded by {h['superseded_by']}")
        changed = "  (file changed since indexed)" if h.get("changed") else ""
        if h.get("vault_missing"):
            changed = f"  (vault {h['vault']} not found: as last indexed)"
        if h.get("imported_by"):
            changed += f"  (imported by {h['imported_by']})"
        print(bold(f"{i}. {h['vault']}:{h['path']}:{h['line_start']}-{h['line_end']}")
              + f"  {h['heading']}  [{state}]" + ("" if listed else f" score {h['score']:.4f}")
              + (f" relevance {h['relevance']:.2f}" if h.get("relevance") is not None else "") + changed)
        meta = [f"topic: {h['topic']}" if h.get("topic") else "",
                f"tags: {', '.join(h['tags'])}" if h.get("tags") else "", f"kind: {h['kind']}", h.get("date") or ""]
        meta += [f"{k}: {_short(v)}" for k, v in (h.get("extra") or {}).items()]
        print("   " + " · ".join(m for m in meta if m))
        snippet = h["snippet"]
        if tty:
            snippet = re.sub(r"\*\*(.+?)\*\*", lambda m: bold(m.group(1)), snippet)
        print("   " + snippet)
        if h.get("explain"):
            print("   explain: " + ", ".join(f"{k}={' '.join(map(str, v)) if isinstance(v, list) else v}"
                                         for k, v in h["explain"].items()))
    if not quiet:
        if listed:
            print(f"{len(hits)} {'note' if len(hits) == 1 else 'notes'}, newest first ({took_ms} ms)", file=sys.stderr)
        else:
            print(f"{len(hits)} {'hit' if len(hits) == 1 else 'hits'} in {took_ms} ms", file=sys.stderr)


def _short(value: Any, limit: int = 40) -> str:
    """A frontmatter value in one short line, as it was written (`alwaysApply: false`, not
    Python's False)."""
    def written(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    text = ", ".join(map(written, value)) if isinstance(value, list) else written(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cmd_status(args: argparse.Namespace) -> int:
    st = _run(args, {"op": "status"})
    if args.json:
        print(json.dumps(st, ensure_ascii=False))
        return 0
    if "pid" in st:
        print(f"daemon pid {st['pid']} on {st['socket']}, up {st['uptime_s']}s, generation {st['generation']}"
              + ("" if st["ready"] else " (starting: first reconcile running)"))
        if st.get("progress"):
            p = st["progress"]
            print(f"reading notes: {p['files_read']:,} of {p['files_to_read']:,} files, "
                  f"{p['chunks_embedded']:,} chunks embedded")
        if st.get("vectors_progress"):
            vp = st["vectors_progress"]
            print(f"embedding in the background: vectors of {vp['notes_embedded']:,} of {vp['notes_to_embed']:,} "
                  "notes (the others are found by their words only meanwhile)")
        if st.get("last_reconcile"):
            lr = st["last_reconcile"]
            print(f"last reconcile {lr['at']} ({lr['reason']}): {lr['summary']}")
        if st.get("write_failure"):
            wf = st["write_failure"]
            print(f"writing the index failed {wf['failures']} time(s) in a row, last at {wf['at']}: {wf['error']} "
                  f"(the daemon tries again within {wf['retry_in_s']:g} s; queries are answered as last indexed)")
        w = st.get("watch")
        if w and w["watched"] < w["directories"]:
            print(f"watching only {w['watched']} of {w['directories']} directories (inotify watch limit "
                  f"{w['limit']} reached): edits elsewhere are found by a reconcile each minute instead; "
                  "raise fs.inotify.max_user_watches")
        if w and w.get("outside_unwatched"):
            print(f"notes that are symlinks live in {w['outside'] + w['outside_unwatched']} directories outside the "
                  f"vaults; {w['outside']} are watched, edits in the other {w['outside_unwatched']} are found by the "
                  "periodic reconcile")
        if st.get("last_inventory"):
            print(f"last inventory {st['last_inventory']} (see inventory/latest.txt in the state dir)")
        if st.get("config_changed"):
            print(f"the config file {st['config_file']} changed since the daemon read it: "
                  f"`systemctl --user reload vaultmem` (or `kill -HUP {st['pid']}`) applies it")
    print(f"state dir: {st['state_dir']}")
    if st.get("vectors_to_embed") and not st.get("vectors_progress"):
        print(f"{st['vectors_to_embed']:,} notes have no vectors yet: they are found by their words only until "
              "the daemon embeds them (or `vaultmem index` does)")
    if st.get("incomplete") and st.get("ready", True):  # a daemon still starting said so above
        print(f"answers may be incomplete: {st['incomplete']}")
    for v in st["vaults"]:
        if not v.get("configured", True):
            print(f"vault {v['name']}: {v['root']} (not in the config: its notes are answered as last indexed and "
                  f"not updated; `vaultmem reindex --drop-vault {v['name']}` takes them out)")
            continue
        print(f"vault {v['name']}: {v['root']}" + ("" if v.get("found", True) else
              " (directory not found: its notes are kept as last indexed until it is back)"))
    from .agents import unindexed_homes
    from .hooks import missing_hook

    hints = [] if args.quiet else [*unindexed_homes([v["root"] for v in st["vaults"]]),
                                   missing_hook("claude"), missing_hook("codex"),
                                   missing_hook("gemini")]
    for hint in hints:
        if hint is not None:
            print(hint)
    print(f"{st['notes']} notes ({st['current']} current), {st['chunks']} chunks, "
          f"{st['skipped']} skipped, {st['pending']} pending; embedder {st['embedder']} ({st['dim']}-d)")
    if st.get("read_with_problems"):
        print(f"{st['read_with_problems']} note(s) indexed despite problems in the file (malformed frontmatter, "
              "a bad date, a legacy encoding): `vaultmem inventory` lists them")
    for s in st["skipped_files"]:
        print(f"skipped {s['key']}: {s['reason']}")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    if args.drop_vault and args.rebuild:
        raise UsageError("--drop-vault and --rebuild do not go together (a rebuild reads the configured vaults only)")
    req = {"op": "reindex", "drop": args.drop_vault} if args.drop_vault else {"op": "reindex", "rebuild": bool(args.rebuild)}
    backend = _backend(args)
    try:
        out = backend.request(req)
    finally:
        backend.close()
    if args.drop_vault and not args.json and not args.quiet:
        r = out["report"]
        print(f"dropped vault {', '.join(args.drop_vault)} from the index: {r['removed']} "
              f"{'note' if r['removed'] == 1 else 'notes'} removed (the files are untouched)")
        return 0
    _print_reindex(args, out)
    return 0


def _print_reindex(args: argparse.Namespace, out: dict) -> None:
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return
    if args.quiet:
        return
    r = out["report"]
    for key, reason in sorted(out.get("problems", {}).items()):
        print(f"skipped {key}: {reason}", file=sys.stderr)
    print(f"reindexed: {r['files']} files: {r['added']} added, {r['updated']} updated, {r['removed']} removed, "
          f"{r['unchanged']} unchanged, {r['skipped']} skipped; {r['chunks_embedded']} chunks embedded")


def _run(args: argparse.Namespace, req: dict) -> dict:
    backend = _backend(args)
    try:
        out = backend.request(req)
    finally:
        backend.close()
    out.pop("ok", None)
    return out


def cmd_remember(args: argparse.Namespace) -> int:
    if args.text in ([], ["-"]):
        if sys.stdin.isatty() and args.text == []:
            raise UsageError("give the note's text as an argument, or '-' to read it from stdin")
        try:
            text = sys.stdin.buffer.read().decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise UsageError(f"the note's text on stdin is not UTF-8 (invalid byte at offset {err.start}); "
                             "`iconv -f ENCODING -t UTF-8` converts it") from None
    else:
        text = " ".join(args.text)
    out = _run(args, {"op": "remember", "topic": args.topic, "text": text, "tags": args.tag, "kind": args.kind,
                      "importance": args.importance, "vault": args.vault, "cwd": os.getcwd()})
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    print(f"remembered {out['vault']}:{out['path']}")
    for p in out["superseded"]:
        print(f"supersedes {out['vault']}:{p}")
    if not out["current"]:
        print(f"note: {out['vault']}:{out['superseded_by']} stays current (it is dated later)", file=sys.stderr)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    action = "delete" if args.delete else "restore" if args.restore else "retire"
    req = {"op": "forget", "action": action, "path": args.paths or None, "topic": args.topic, "vault": args.vault,
           "cwd": os.getcwd()}
    backend = _backend(args)
    try:
        if action == "delete" and not args.yes and not args.dry_run:
            listed = backend.request({**req, "dry_run": True})["notes"]
            if not sys.stdin.isatty():
                raise UsageError(f"refusing to delete {len(listed)} file(s) without --yes (not a terminal)")
            for key in listed:
                print(f"  {key}", file=sys.stderr)
            answer = input(f"delete {len(listed)} file(s)? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing deleted", file=sys.stderr)
                return 1
        out = backend.request({**req, "dry_run": args.dry_run, "yes": action == "delete"})
    finally:
        backend.close()
    out.pop("ok", None)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    verb = {"retire": "retired", "restore": "restored", "delete": "deleted"}[action]
    if args.dry_run:
        verb = f"would be {verb}"
    changed = set(out.get("changed", out["notes"]))
    for key in out["notes"]:
        print(f"{verb} {key}" if key in changed else f"already {verb.split()[-1]} {key}")
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    out = _run(args, {"op": "feedback", "path": args.path, "useful": bool(args.useful), "task": args.task,
                      "cwd": os.getcwd()})
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(f"{out['note']}: feedback {out['feedback']:.3f} (ranking factor {out['feedback_factor']:.3f})")
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise UsageError("--top must be 0 (all) or more")
    out = _run(args, {"op": "tags", **_filters_of(args)})
    if args.top:
        out["tags"] = out["tags"][: args.top]
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    elif not out["tags"]:
        if not args.quiet:
            print(f"no tags on the {out['notes']} notes that pass", file=sys.stderr)
    else:
        for t in out["tags"]:
            print(f"{t['notes']:6d}  {t['tag']}")
    return 0 if out["tags"] else 1


def cmd_stats(args: argparse.Namespace) -> int:
    out = _run(args, {"op": "stats", "paths": args.paths, "task": args.task, "cwd": os.getcwd()})
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    notes = out["notes"]
    print(f"{len(notes)} notes, {out['never_retrieved']} never retrieved (records since {out['since']})")
    for n in notes if not args.top else notes[: args.top]:
        fb = f"  feedback {n['feedback']:.2f} (+{n['useful']}/-{n['useless']})" if n["feedback"] is not None else ""
        state = "" if n["current"] else "  [retired]" if n["retired"] else "  [superseded]"
        last = f", last {n['last_retrieved']}" if n["last_retrieved"] else ""
        print(f"{n['retrieved']:6d}  {n['note']}{last}{fb}{state}")
    for a in out.get("attribution", []):
        credit = "" if a["credit"] is None else f"  credit {a['credit']:+g}"
        seen = (f"retrieved {a['retrieved']}x, best rank {a['best_rank']}, score {a['best_score']:.4f}"
                if a["retrieved"] else "never retrieved for it")
        print(f"task {a['task']}: {a['note']}  {seen}{credit}")
    return 0


def cmd_inventory(args: argparse.Namespace) -> int:
    from .inventory import format_report

    report = _run(args, {"op": "inventory", "stale_days": args.stale_days,
                         "unretrieved_days": args.unretrieved_days})
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        sys.stdout.write(format_report(report, limit=0 if args.all else 20))
    return 0 if report["clean"] else 1


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_server import run

    return run(_settings(args), socket=args.socket,
               explicit_state_dir=bool(args.state_dir or os.environ.get("VAULTMEM_STATE_DIR")))


def cmd_hook(args: argparse.Namespace) -> int:
    from . import hooks

    if args.action in ("print", "install", "uninstall"):
        exe = _self_command()
        commands = {a: hooks.hook_command(exe, a, args.agent) for a in hooks.HOOKS if args.only in (None, a)}
        if args.action == "print":
            entries = {hooks.event(a, args.agent): [hooks.hook_entry(a, c, args.agent)] for a, c in commands.items()}
            print(json.dumps({"hooks": entries}, indent=2))
            return 0
        target = Path(os.path.expanduser(args.settings)) if args.settings else hooks.hooks_file(args.agent)
        if args.action == "uninstall":
            for action, removed in hooks.uninstall_hook(target, list(commands), args.agent).items():
                print(f"removed the {action} hook from {target}" if removed else f"the {action} hook is not in {target}")
            return 0
        added = hooks.install_hook(target, commands, args.agent)
        for action, new in added.items():
            print(f"added the {action} hook to {target}" if new else f"the {action} hook is already in {target}")
        if args.agent == "codex" and any(added.values()):
            print("Codex runs a new hook only once you trust it: start codex, open /hooks and trust vaultmem's")
        return 0
    sys.stdout.write(hooks.hook_output(args.action, args.agent, _hook_text(args)))
    return 0


# A hook runs before the agent goes on: it waits a fifth as long for the daemon (1 s for its
# ping, 6 s for an answer), then answers from the index in this process.
HOOK_PATIENCE = 0.2


def _hook_text(args: argparse.Namespace) -> str:
    """What the session-start or user-prompt-submit hook adds to the session: '' when there is
    nothing to add or anything fails (said on stderr)."""
    from . import recall

    event: dict = {}
    if not sys.stdin.isatty():
        try:
            event = json.loads(sys.stdin.read() or "{}")
        except (ValueError, UnicodeDecodeError):
            event = {}
        event = event if isinstance(event, dict) else {}
    field = {k: v for k, v in event.items() if isinstance(v, str)}.get  # a field of the wrong type is no field
    text = ""
    try:
        prompt = args.prompt if args.prompt is not None else field("prompt", "")
        if args.action == "user-prompt-submit" and not (prompt and recall.prompt_queries(prompt)):
            return ""  # nothing to search for: no need to wait for an index
        backend = _backend(args, patience=HOOK_PATIENCE)
        backend.quiet = True
        session = field("session_id")
        try:
            if args.action == "session-start":
                cwd = args.cwd or field("cwd") or os.getcwd()
                text = recall.session_start(backend, backend.settings, os.path.abspath(cwd), args.budget,
                                           session_id=session, source=field("source"), agent=args.agent)
            else:
                text = recall.prompt_context(backend, backend.settings, prompt, session_id=session, budget=args.budget,
                                            agent=args.agent, cwd=os.path.abspath(args.cwd or field("cwd") or os.getcwd()))
        finally:
            backend.close()
    except Exception as err:  # a hook must never break the session that runs it
        if args.debug:
            _traceback()
        print(f"vaultmem hook: no memories ({err})", file=sys.stderr)
        return ""
    return text


def _self_command() -> str:
    """How to run this vaultmem again, as a shell command line (Claude Code runs a hook's
    command through the shell, so a path with a space is quoted): the script on PATH, else
    this interpreter."""
    import shlex

    exe = Path(sys.argv[0])
    if exe.name == "vaultmem" and exe.exists():
        return shlex.quote(str(exe.resolve()))
    return shlex.join([sys.executable, "-m", "vaultmem.cli"])


def cmd_daemon(args: argparse.Namespace) -> int:
    from .client import socket_path
    from .daemon import RELOAD, Daemon

    def load():  # its --vault flags and the config's vaults are one set, read again at each reload
        from .config import resolve

        return resolve({"config": args.config, "state_dir": args.state_dir, "debug": args.debug,
                        "more_vaults": args.vault})

    settings = load()
    # a vault directory missing at start (a drive not mounted yet at login) is watched for, as
    # one that goes away later is: the daemon logs it and serves the rest meanwhile
    if not args.debug and not args.quiet:
        import logging

        logging.getLogger().setLevel(logging.INFO)
    daemon = Daemon(settings, socket_path(args.socket, settings.daemon.socket), reload_settings=load)
    if daemon.run() != RELOAD:
        return 0
    # start over in this very process (systemd follows the pid): every setting read afresh
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError as err:  # exit 1: systemd starts it again (Restart=on-failure)
        print(f"vaultmem: error: the daemon stopped to reload but cannot start again: {err}", file=sys.stderr)
        return 1


def cmd_service(args: argparse.Namespace) -> int:
    from .service import run

    return run(args, _settings(args, vaults=args.vault))


def _traceback() -> None:
    """The exception being handled, with its traceback, on stderr (--debug)."""
    import traceback  # only a failure under --debug prints one

    traceback.print_exc()


COMMANDS = {"index": cmd_index, "query": cmd_query, "status": cmd_status, "reindex": cmd_reindex,
            "remember": cmd_remember, "forget": cmd_forget, "feedback": cmd_feedback, "stats": cmd_stats, "tags": cmd_tags,
            "inventory": cmd_inventory, "mcp": cmd_mcp, "hook": cmd_hook, "daemon": cmd_daemon, "service": cmd_service}


# answered by the daemon when one runs: no logging until they open the index themselves
CLIENT_COMMANDS = {"query", "status", "reindex", "remember", "forget", "feedback", "tags", "stats", "inventory", "hook"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    # bytes that are no UTF-8 reach Python as lone surrogates, which fail only later, as a
    # traceback, when the query, topic or path is written anywhere
    bad = next((a for a in argv if any("\udc80" <= c <= "\udcff" for c in a)), None)
    if bad is not None:
        print(f"vaultmem: error: argument {bad.encode('utf-8', 'surrogateescape')!r} is not UTF-8 text", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, with its usage and the nearest option (argparse: the top's)
        unknown_options(parser, args, extra)
    from .private import restrict_umask

    restrict_umask()  # what vaultmem keeps (state, cache, its socket, a note remembered) is the user's alone
    if not args.command:
        parser.print_help()
        return 2
    logs.want(args.debug, args.quiet)
    if args.command not in CLIENT_COMMANDS:  # these set logging up when they open the index (logs.py)
        logs.ready()
    try:
        return COMMANDS[args.command](args)
    except VaultmemError as err:
        if args.debug:
            _traceback()
        print(f"vaultmem: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("vaultmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        import sqlite3

        full = is_disk_full(err)
        if isinstance(err, sqlite3.DatabaseError) and not full:  # a page gone bad after it was opened
            print(f"vaultmem: error: a database of the index is damaged ({err}): `vaultmem index` checks the index "
                  "and makes it again from the notes", file=sys.stderr)
            return IndexDamagedError.exit_code
        if not (full or isinstance(err, OSError)):  # a bug: its traceback is what a report needs
            raise
        if args.debug:
            _traceback()
        return _io_failed(err)


def _io_failed(err: BaseException) -> int:
    """Say a failed read or write (a full disk, a file that is not there) in one line on
    stderr; its exit code."""
    full = is_disk_full(err)
    print(f"vaultmem: error: {'no space left on the device: ' if full else ''}{err}", file=sys.stderr)
    return DiskFullError.exit_code if full else 2


# imported by every process that opens an index in itself (the engines with it)
OPENS_AN_INDEX = "vaultmem.index"


def run() -> None:
    """The `vaultmem` command (the console script, and `python -m vaultmem.cli`): main(), then
    the process ends. A process that opened no index (a client the daemon answered, a hook, a
    usage error) ends at once, its output flushed: tearing the interpreter down took ~5 ms of
    every fresh query and prompt hook, with nothing left to close or write. One that opened an
    index ends as Python ends, closing the engines."""
    code = main()
    if OPENS_AN_INDEX in sys.modules:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:  # the reader went away (`| head`): as main() takes it, no error
            pass
        except OSError as err:  # a full disk under `> file`: said as main() says it
            code = _io_failed(err) if stream is sys.stdout else code
    os._exit(code)


if __name__ == "__main__":
    run()
