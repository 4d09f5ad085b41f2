"""The `vaultmem` command line. Parsing, output formatting and exit codes only: engines are
imported inside the commands that need them, so `vaultmem --help` starts at once.

Exit codes: 0 success (query: at least one hit), 1 query found nothing, 2 usage or config
error, 3 no index yet, 4 embedder mismatch (reindex), 5 embedder failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from typing import Any

from . import __version__
from .errors import UsageError, VaultmemError

EPILOG = """exit codes: 0 ok (query: hits found), 1 query found nothing, 2 usage/config error,
3 no index yet, 4 embedder changed (run `vaultmem index --rebuild`), 5 embedder failed"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", metavar="DIR",
                   help="where the index lives (default $VAULTMEM_STATE_DIR or ~/.local/state/vaultmem)")
    p.add_argument("--config", metavar="FILE", help="config file (default ~/.config/vaultmem/vaultmem.toml)")
    p.add_argument("--debug", action="store_true", help="log everything and show tracebacks")


def _query_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", type=int, metavar="N", help="number of hits (default 10)")
    p.add_argument("--tag", action="append", default=[], metavar="T", help="only notes with this tag (repeat: all of them)")
    p.add_argument("--any-tag", action="store_true", help="with several --tag, any one of them is enough")
    p.add_argument("--kind", action="append", default=[], metavar="K", help="only notes of this kind (repeatable)")
    p.add_argument("--topic", metavar="X", help="only notes on this topic")
    p.add_argument("--path", metavar="GLOB", help="only notes whose vault-relative path matches, e.g. 'memory/**'")
    p.add_argument("--history", action="store_true", help="include superseded notes (marked as such)")
    p.add_argument("--mode", choices=["hybrid", "text", "vector"], help="ranking: hybrid (default), text or vector")
    p.add_argument("--half-life", metavar="DAYS", help="time decay: a note this old counts half (e.g. 90 or 90d)")
    p.add_argument("--explain", action="store_true", help="show every factor of each hit's score")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vaultmem",
        description="Local memory for AI coding agents: search your CLAUDE.md and memory/*.md notes "
                    "by words and meaning, newest version of each fact first.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"vaultmem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("index", help="index vaults (incremental: only changed files are read)",
                       description="Build or update the index of one or more vaults. Unchanged files cost "
                                   "one stat; changed text is re-embedded, unchanged text never.",
                       epilog="example: vaultmem index --vault ~/.claude --vault work=~/src/app --state-dir ~/.local/state/vaultmem")
    p.add_argument("--vault", action="append", default=[], metavar="[NAME=]DIR",
                   help="a vault directory (repeatable; default: the vaults indexed before)")
    p.add_argument("--rebuild", action="store_true", help="drop the index and re-read every file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _common(p)

    p = sub.add_parser("query", help="search the index",
                       description="Search current notes by words and meaning. Put a phrase in double quotes "
                                   "to require it exactly (also inside Japanese/Korean text).",
                       epilog='examples:\n  vaultmem query "how do we deploy"\n  vaultmem query \'"デプロイ手順"\' --mode text\n'
                              '  vaultmem query deploy --tag ops --history --json\n'
                              '  vaultmem query --batch questions.txt --json',
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("text", nargs="*", help="what to look for")
    p.add_argument("--batch", metavar="FILE", help="one query per line (text, or JSON with 'text' and options); '-' is stdin")
    p.add_argument("--vault", action="append", default=[], metavar="NAME|DIR", help="only this vault (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON: {hits: [...], took_ms}")
    _query_options(p)
    _common(p)

    p = sub.add_parser("status", help="what is indexed, and what was skipped and why")
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    return parser


def _settings(args: argparse.Namespace, vaults: list[str] | None = None, search: dict | None = None):
    from .config import resolve

    flags: dict[str, Any] = {"config": args.config, "state_dir": args.state_dir, "debug": args.debug}
    if vaults:
        flags["vaults"] = vaults
    if search:
        flags["search"] = search
    return resolve(flags)


def _half_life(value: str | None) -> float | None:
    if value is None:
        return None
    v = value.strip().lower()
    mult = 1.0
    for suffix, m in (("d", 1.0), ("w", 7.0), ("y", 365.0)):
        if v.endswith(suffix):
            v, mult = v[:-1], m
            break
    try:
        return float(v) * mult
    except ValueError:
        raise UsageError(f"--half-life {value!r}: give days, e.g. 90 or 90d or 12w") from None


# ------------------------------------------------------------------ commands


def cmd_index(args: argparse.Namespace) -> int:
    from .index import VaultIndex, print_progress

    settings = _settings(args, vaults=args.vault)
    with VaultIndex(settings, writable=True) as idx:
        vaults = list(settings.vaults) or idx.vaults()
        if not vaults:
            raise UsageError("no vault given: pass --vault DIR (or set vaults in the config file)")
        for v in vaults:
            if not v.root.is_dir():
                raise UsageError(f"vault directory not found: {v.root}")
        if args.rebuild:
            idx.rebuild()
        report = idx.sync(vaults, progress=print_progress)
        if args.json:
            print(json.dumps({**report.__dict__, "vaults": [v.name for v in vaults]}, ensure_ascii=False))
        else:
            for key, reason in sorted(report.problems.items()):
                print(f"skipped {key}: {reason}", file=sys.stderr)
            print(f"indexed {', '.join(v.name for v in vaults)}: {report.summary()}")
    return 0


def _vault_filter(values: list[str], known) -> tuple[str, ...]:
    out = []
    for v in values:
        names = [x.name for x in known if x.name == v or str(x.root) == os.path.realpath(os.path.expanduser(v))]
        if not names:
            raise UsageError(f"--vault {v}: not an indexed vault (known: {', '.join(x.name for x in known) or 'none'})")
        out.extend(names)
    return tuple(out)


def _make_query(opts: dict[str, Any], settings, known) -> "Query":
    from .search import Query

    text = opts.get("text")
    if not isinstance(text, str):
        raise UsageError("a query needs 'text'")
    k = opts.get("k") or settings.search.k
    if int(k) < 1:
        raise UsageError("-k must be at least 1")
    as_list = lambda v: tuple(v) if isinstance(v, (list, tuple)) else ((v,) if v else ())  # noqa: E731
    return Query(
        text=text, k=int(k), tags=as_list(opts.get("tags") or opts.get("tag")),
        any_tags=bool(opts.get("any_tags")), kinds=as_list(opts.get("kinds") or opts.get("kind")),
        topic=opts.get("topic"), vaults=_vault_filter(list(as_list(opts.get("vaults") or opts.get("vault"))), known),
        path_glob=opts.get("path"), history=bool(opts.get("history")),
        mode=opts.get("mode") or settings.search.mode, explain=bool(opts.get("explain")),
        half_life_days=_half_life(str(opts["half_life"])) if opts.get("half_life") is not None else None,
    )


def cmd_query(args: argparse.Namespace) -> int:
    from .index import VaultIndex
    from .search import Searcher

    settings = _settings(args)
    _half_life(args.half_life)  # a bad flag is a usage error before anything is opened
    opts = {"k": args.k, "tags": args.tag, "any_tags": args.any_tag, "kinds": args.kind, "topic": args.topic,
            "vaults": args.vault, "path": args.path, "history": args.history, "mode": args.mode,
            "explain": args.explain, "half_life": args.half_life}
    with VaultIndex(settings, writable=False) as idx:
        searcher = Searcher(idx)
        known = idx.vaults()
        if args.batch:
            if args.text:
                raise UsageError("give either query text or --batch FILE, not both")
            return _run_batch(args.batch, opts, settings, known, searcher)
        if not args.text:
            raise UsageError("nothing to search for: give query text (or --batch FILE)")
        query = _make_query({**opts, "text": " ".join(args.text)}, settings, known)
        hits, info = searcher.search(query)
        if args.json:
            print(json.dumps({"hits": [h.to_json() for h in hits], **info}, ensure_ascii=False))
        else:
            _print_hits(hits, info)
        return 0 if hits else 1


def _run_batch(path: str, opts: dict, settings, known, searcher) -> int:
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with stream:
        for n, line in enumerate(stream, 1):
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("{"):
                    item = json.loads(line)
                    if not isinstance(item, dict):
                        raise UsageError("a JSON line must be an object")
                    query = _make_query({**opts, **{k.replace("-", "_"): v for k, v in item.items()}}, settings, known)
                else:
                    query = _make_query({**opts, "text": line}, settings, known)
                hits, info = searcher.search(query)
                out = {"hits": [h.to_json() for h in hits], **info}
            except (VaultmemError, ValueError, TypeError) as err:
                out = {"error": f"line {n}: {err}", "hits": []}
            print(json.dumps(out, ensure_ascii=False), flush=True)
    return 0


def _print_hits(hits, info) -> None:
    tty = sys.stdout.isatty()
    bold = (lambda s: f"\033[1m{s}\033[0m") if tty else (lambda s: s)
    if not hits:
        print("no matching notes", file=sys.stderr)
        return
    for i, h in enumerate(hits, 1):
        state = "current" if h.current else f"superseded by {h.superseded_by}"
        changed = "  (file changed since indexed)" if h.changed else ""
        print(bold(f"{i}. {h.vault}:{h.path}:{h.line_start}-{h.line_end}") + f"  {h.heading}  [{state}] score {h.score:.4f}{changed}")
        meta = [f"topic: {h.topic}" if h.topic else "", f"tags: {', '.join(h.tags)}" if h.tags else "",
                f"kind: {h.kind}", h.date or ""]
        print("   " + " · ".join(m for m in meta if m))
        snippet = h.snippet
        if tty:
            import re

            snippet = re.sub(r"\*\*(.+?)\*\*", lambda m: bold(m.group(1)), snippet)
        print("   " + snippet)
        if h.explain:
            print("   explain: " + ", ".join(f"{k}={v}" for k, v in h.explain.items()))
    print(f"{len(hits)} hits in {info['took_ms']} ms", file=sys.stderr)


def cmd_status(args: argparse.Namespace) -> int:
    from .index import VaultIndex

    settings = _settings(args)
    with VaultIndex(settings, writable=False) as idx:
        st = idx.status()
    if args.json:
        print(json.dumps(st, ensure_ascii=False))
        return 0
    print(f"state dir: {st['state_dir']}")
    for v in st["vaults"]:
        print(f"vault {v['name']}: {v['root']}")
    print(f"{st['notes']} notes ({st['current']} current), {st['chunks']} chunks, "
          f"{st['skipped']} skipped, {st['pending']} pending; embedder {st['embedder']} ({st['dim']}-d)")
    for s in st["skipped_files"]:
        print(f"skipped {s['key']}: {s['reason']}")
    return 0


COMMANDS = {"index": cmd_index, "query": cmd_query, "status": cmd_status}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="vaultmem: %(levelname)s: %(message)s")
    if not args.debug:
        for noisy in ("lancedb", "pylance", "lance"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        return COMMANDS[args.command](args)
    except VaultmemError as err:
        if args.debug:
            traceback.print_exc()
        print(f"vaultmem: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("vaultmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:
        if args.debug:
            traceback.print_exc()
        print(f"vaultmem: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
