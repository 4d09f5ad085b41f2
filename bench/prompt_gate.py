#!/usr/bin/env python3
"""How sure must the prompt hook be before it speaks? The raw cosine of the best hit, measured.

`vaultmem hook user-prompt-submit` runs on every prompt a user sends, and most prompts have
nothing to do with any note. It adds a note only when that note's best chunk reaches a cosine of
`[agent] prompt_min_cosine` with the prompt. This script measures where that line should sit,
on the dev sets under ../shared/eval (read in place):

- on topic: each set's judged questions against the set's own vault (LoCoMo turns, JSQuAD);
  the share of questions that would still get a note, and a relevant one, at each gate;
- off topic: the same questions against a vault that cannot answer them (the 82 real CLAUDE.md
  and memory files of claude-corpus); the share that would wrongly get a note.

    python bench/prompt_gate.py                  # all queries, gates 0.15..0.40
    python bench/prompt_gate.py --limit 300 --k 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaultmem.config import resolve  # noqa: E402
from vaultmem.index import VaultIndex  # noqa: E402
from vaultmem.search import Query, Searcher  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval"
VAULTS = {"locomo-turns": EVAL / "locomo-dev" / "turns" / "vault", "jsquad": EVAL / "jsquad" / "vault",
          "claude-corpus": EVAL / "claude-corpus" / "files"}
QUERIES = {"locomo-turns": EVAL / "locomo-dev" / "turns" / "queries.jsonl", "jsquad": EVAL / "jsquad" / "queries.jsonl"}
GATES = (0.15, 0.20, 0.22, 0.25, 0.28, 0.30, 0.35, 0.40)


def open_searcher(name: str, state_root: Path) -> tuple[VaultIndex, Searcher]:
    settings = resolve({"state_dir": str(state_root / f"gate-{name}"), "vaults": [f"{name}={VAULTS[name]}"],
                        "index": {"include": ["**/*.md"]}}, env={})
    idx = VaultIndex(settings, writable=True)
    report = idx.sync(list(settings.vaults))
    print(f"# {name}: {report.summary()}", file=sys.stderr)
    return idx, Searcher(idx)


def kept(hits, gate: float) -> list:
    """The hits the hook would show: those whose best chunk reaches the gate."""
    return [h for h in hits if (h.explain or {}).get("cosine", -1.0) >= gate]


def pct(xs: list[float], p: int) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, help="only the first N queries of each set")
    ap.add_argument("--k", type=int, default=3, help="hits the hook looks at (default 3)")
    ap.add_argument("--state-root", default=str(ROOT / "bench" / "out"))
    args = ap.parse_args()
    state_root = Path(args.state_root)
    off_idx, off = open_searcher("claude-corpus", state_root)
    for name, qfile in QUERIES.items():
        rows = [json.loads(line) for line in qfile.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if r.get("relevant_note_ids")][: args.limit]
        idx, on = open_searcher(name, state_root)
        on_hits, off_hits = [], []
        for r in rows:
            on_hits.append((on.search(Query(r["query"], k=args.k, explain=True, record=False))[0],
                            set(r["relevant_note_ids"])))
            off_hits.append(off.search(Query(r["query"], k=args.k, explain=True, record=False))[0])
        idx.close()
        top = lambda hits: (hits[0].explain or {}).get("cosine", 0.0) if hits else 0.0  # noqa: E731
        on_top, off_top = [top(h) for h, _ in on_hits], [top(h) for h in off_hits]
        print(f"\n{name}: {len(rows)} questions, top hit's cosine")
        print("  on topic   p5 {:.3f}  p10 {:.3f}  p50 {:.3f}".format(*(pct(on_top, p) for p in (5, 10, 50))))
        print("  off topic  p50 {:.3f}  p90 {:.3f}  p95 {:.3f}".format(*(pct(off_top, p) for p in (50, 90, 95))))
        print(f"  {'gate':>5}  {'on: any note':>12}  {'on: a relevant one':>18}  {'off: any note':>13}")
        for g in GATES:
            any_on = sum(bool(kept(h, g)) for h, _ in on_hits) / len(rows)
            rel_on = sum(any(h.path[:-3] in rel for h in kept(hs, g)) for hs, rel in on_hits) / len(rows)
            any_off = sum(bool(kept(h, g)) for h in off_hits) / len(rows)
            print(f"  {g:5.2f}  {any_on:12.3f}  {rel_on:18.3f}  {any_off:13.3f}")
        print(f"  (median top cosine on/off: {statistics.median(on_top):.3f} / {statistics.median(off_top):.3f})")
    off_idx.close()


if __name__ == "__main__":
    main()
