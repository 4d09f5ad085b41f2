#!/usr/bin/env python3
"""Retrieval quality on the judged dev sets under ../shared/eval (read in place, never copied).

Indexes each set's vault into its own state dir (reused across runs: a re-run is a no-change
sync), runs every judged query in-process through the same Searcher the CLI uses, and prints
recall@1/5/10 and MRR per set (and per LoCoMo category), plus for `supersession` the share of
chains whose current note comes first and whose superseded notes stay hidden by default, and for
`longmemeval-ku` the share of questions where the newest evidence outranks the stale one.

    python bench/eval.py                          # all sets, configured defaults
    python bench/eval.py --sets jsquad --mode text
    python bench/eval.py --fusion score --text-weight 0.7 --vector-weight 0.3
    python bench/eval.py --embedder e5            # multilingual-e5-small (first index: minutes)
    python bench/eval.py --halves                 # each set also split in two by conversation/article

Each figure comes with its standard error (the binomial one for recall, sqrt(p(1-p)/n)).
`--halves` splits a set's queries in two by the conversation or article their evidence is in
(the first folder of the note id; alternate folders in sorted order): a change is kept only if
it helps both halves, so that a gain fitted to some queries shows as a loss on the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaultmem.config import resolve  # noqa: E402
from vaultmem.index import VaultIndex  # noqa: E402
from vaultmem.search import Query, Searcher  # noqa: E402
from vaultmem.usage import Usage  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval"
SETS = {
    "locomo-session": EVAL / "locomo-dev" / "session",
    "locomo-turns": EVAL / "locomo-dev" / "turns",
    "jsquad": EVAL / "jsquad",
    "korquad-dev": EVAL / "korquad-dev",
    "supersession": EVAL / "supersession",
    "longmemeval-ku": EVAL / "longmemeval-ku",
}


def note_id(hit) -> str:
    return hit.path[:-3] if hit.path.endswith(".md") else hit.path


def open_index(name: str, args) -> VaultIndex:
    search = {k: v for k, v in {
        "fusion": args.fusion, "rrf_k": args.rrf_k, "text_weight": args.text_weight,
        "vector_weight": args.vector_weight, "min_cosine": args.min_cosine, "entity_weight": args.entity_weight,
        "importance_weight": args.importance_weight, "candidates": args.candidates,
        "half_life_days": args.half_life, "date_weight": args.date_weight, "expand_notes": args.expand_notes,
        "expand_terms": args.expand_terms, "expand_weight": args.expand_weight,
    }.items() if v is not None}
    index = {"include": ["**/*.md"]}
    if args.chunk_chars:
        index["chunk_chars"] = args.chunk_chars
    suffix = "" if args.embedder == "use" else f"-{args.embedder}"  # the USE state dirs keep their old names
    state = Path(args.state_root) / f"{name}-c{args.chunk_chars or 'default'}-{args.dtype}{suffix}"
    settings = resolve({"state_dir": str(state), "vaults": [f"{name}={SETS[name] / 'vault'}"],
                        "search": search, "index": index, "embedder": {"vector_dtype": args.dtype, "kind": args.embedder}}, env={})
    idx = VaultIndex(settings, writable=True)
    t = time.perf_counter()
    report = idx.sync(list(settings.vaults))
    print(f"# {name}: sync {report.summary()} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
    return idx


def load_queries(name: str) -> list[dict]:
    rows = [json.loads(line) for line in (SETS[name] / "queries.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("relevant_note_ids") or r.get("current_id")]


def group_of(q: dict) -> str:
    """The conversation or article a query's evidence is in (the first folder of its note id)."""
    ids = q.get("relevant_note_ids") or [q.get("current_id", "")]
    return ids[0].split("/", 1)[0]


def stats(rs: list[int | None]) -> dict:
    """Recall at 1, 5, 10 and MRR of the ranks `rs` (None: not in the top 10), each with its
    standard error (`se_R@1`, ...)."""
    n = len(rs)
    out: dict = {"n": n}
    for k in (1, 5, 10):
        p = sum(1 for r in rs if r and r <= k) / n
        out[f"R@{k}"], out[f"se_R@{k}"] = p, (p * (1 - p) / n) ** 0.5
    rr = [1 / r if r else 0.0 for r in rs]
    out["MRR"] = sum(rr) / n
    out["se_MRR"] = statistics.pstdev(rr) / n ** 0.5 if n > 1 else 0.0
    return out


def fmt(res: dict) -> str:
    return (f"n={res['n']:4d}  R@1 {res['R@1']:.3f}±{res['se_R@1']:.3f}  R@5 {res['R@5']:.3f}±{res['se_R@5']:.3f}  "
            f"R@10 {res['R@10']:.3f}  MRR {res['MRR']:.3f}±{res['se_MRR']:.3f}")


def recall_set(name: str, args) -> dict:
    idx = open_index(name, args)
    usage = Usage(idx.state_dir)  # as users run it: feedback read, retrievals recorded
    searcher = Searcher(idx, usage)
    queries = load_queries(name)
    if args.limit:
        queries = queries[: args.limit]
    per_cat: dict[str, list[tuple[int | None]]] = defaultdict(list)
    halves: dict[str, list[int | None]] = defaultdict(list)
    groups = sorted({group_of(q) for q in queries})
    half_of = {g: "AB"[i % 2] for i, g in enumerate(groups)}
    ranks = []
    lat = []
    extra = defaultdict(int)
    for q in queries:
        t = time.perf_counter()
        if name == "supersession":
            hits, _ = searcher.search(Query(q["query"], k=10, mode=args.mode))
            ids = [note_id(h) for h in hits]
            hist, _ = searcher.search(Query(q["query"], k=50, mode=args.mode, history=True))
            hist_ids = [note_id(h) for h in hist]
            chain = [q["current_id"], *q["superseded_ids"]]
            in_chain = [i for i in hist_ids if i in chain]
            extra["current_first_in_chain"] += bool(in_chain) and in_chain[0] == q["current_id"]
            extra["no_superseded_shown"] += not any(i in q["superseded_ids"] for i in ids)
            extra["current_rank1"] += bool(ids) and ids[0] == q["current_id"]
            relevant = {q["current_id"]}
        else:
            hits, _ = searcher.search(Query(q["query"], k=10, mode=args.mode, history=name == "longmemeval-ku"))
            ids = [note_id(h) for h in hits]
            relevant = set(q["relevant_note_ids"])
            if name == "longmemeval-ku":
                latest = ids.index(q["latest_note_id"]) if q["latest_note_id"] in ids else 99
                stale = min([ids.index(s) for s in q["stale_note_ids"] if s in ids] or [100])
                extra["latest_above_stale"] += latest < stale
        lat.append((time.perf_counter() - t) * 1000)
        rank = next((i + 1 for i, x in enumerate(ids) if x in relevant), None)
        ranks.append(rank)
        per_cat[q.get("category", "all")].append(rank)
        halves[half_of[group_of(q)]].append(rank)
    idx.close()
    usage.close()

    out = {"set": name, **stats(ranks), "median_ms": statistics.median(lat)}
    if args.halves:
        out["halves"] = {h: stats(rs) for h, rs in sorted(halves.items())}
    if name.startswith("locomo"):
        out["categories"] = {c: stats(rs) for c, rs in sorted(per_cat.items())}
    for k, v in extra.items():
        out[k] = v / len(queries)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="*", default=list(SETS))
    ap.add_argument("--mode", default="hybrid", choices=["hybrid", "text", "vector"])
    ap.add_argument("--fusion", choices=["rrf", "score"])
    ap.add_argument("--rrf-k", type=float)
    ap.add_argument("--text-weight", type=float)
    ap.add_argument("--vector-weight", type=float)
    ap.add_argument("--min-cosine", type=float, help="drop meaning-only candidates under this cosine (0: none)")
    ap.add_argument("--entity-weight", type=float)
    ap.add_argument("--importance-weight", type=float)
    ap.add_argument("--candidates", type=int)
    ap.add_argument("--half-life", type=float, help="time decay in days (default: off)")
    ap.add_argument("--date-weight", type=float)
    ap.add_argument("--expand-notes", type=int, help="notes a hybrid query's second look takes words from")
    ap.add_argument("--expand-terms", type=int, help="words the second look adds (0: one look)")
    ap.add_argument("--expand-weight", type=float, help="the best added word's weight (a query word: 1)")
    ap.add_argument("--chunk-chars", type=int)
    ap.add_argument("--dtype", default="float16", choices=["float16", "float32"], help="stored vector type")
    ap.add_argument("--embedder", default="use", choices=["use", "e5"], help="bundled embedder (each gets its own state dir)")
    ap.add_argument("--limit", type=int, help="only the first N queries of each set")
    ap.add_argument("--halves", action="store_true", help="also each half of a set, split by conversation/article")
    ap.add_argument("--state-root", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for name in args.sets:
        res = recall_set(name, args)
        if args.json:
            print(json.dumps(res))
            continue
        line = f"{name:15s} {fmt(res)}  median {res['median_ms']:.1f} ms"
        for k in ("current_first_in_chain", "no_superseded_shown", "current_rank1", "latest_above_stale"):
            if k in res:
                line += f"  {k} {res[k]:.3f}"
        print(line, flush=True)
        for h, st in res.get("halves", {}).items():
            print(f"    half {h:7s} {fmt(st)}")
        for c, st in res.get("categories", {}).items():
            print(f"    {c:12s} {fmt(st)}")


if __name__ == "__main__":
    main()
