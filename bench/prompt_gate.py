#!/usr/bin/env python3
"""How sure must the prompt hook be before it speaks? A hit's relevance (the chance it answers,
search.relevance), measured; and, to compare, the raw cosine the hook gated on before.

`vaultmem hook user-prompt-submit` runs on every prompt a user sends, and most prompts have
nothing to do with any note. It adds a note only when that note's relevance reaches
`[agent] min_relevance`. This script measures where that line should sit,
on the dev sets under ../shared/eval (read in place), with the hook's own choice of hits
(`recall.prompt_hits`: files the agent loads itself passed over, then the best `--k`; `--agent
codex` passes over AGENTS.md alone, so the CLAUDE.md files of the off-topic vault compete too):

- on topic: each set's judged questions against the set's own vault (LoCoMo turns, JSQuAD);
  the share of questions that would still get a note, and a relevant one, at each gate;
- off topic: the same questions against a vault that cannot answer them (the 82 real CLAUDE.md
  and memory files of claude-corpus); the share that would wrongly get a note.

    python bench/prompt_gate.py                  # all queries, the relevance gates, then cosine ones
    python bench/prompt_gate.py --by cosine
    python bench/prompt_gate.py --limit 300 --k 3
    python bench/prompt_gate.py --agent codex
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaultmem.recall import prompt_hits  # noqa: E402
from vaultmem.backend import Backend  # noqa: E402
from vaultmem.config import resolve  # noqa: E402
from vaultmem.index import VaultIndex  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval"
VAULTS = {"locomo-turns": EVAL / "locomo-dev" / "turns" / "vault", "jsquad": EVAL / "jsquad" / "vault",
          "claude-corpus": EVAL / "claude-corpus" / "files"}
QUERIES = {"locomo-turns": EVAL / "locomo-dev" / "turns" / "queries.jsonl", "jsquad": EVAL / "jsquad" / "queries.jsonl"}
GATES = {"relevance": (0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2),
         "cosine": (0.0, 0.15, 0.20, 0.22, 0.25, 0.28, 0.30, 0.35, 0.40)}


def open_backend(name: str, state_root: Path, k: int) -> Backend:
    settings = resolve({"state_dir": str(state_root / f"gate-{name}"), "vaults": [f"{name}={VAULTS[name]}"],
                        "index": {"include": ["**/*.md"]}, "agent": {"prompt_notes": k}}, env={})
    idx = VaultIndex(settings, writable=True)
    print(f"# {name}: {idx.sync(list(settings.vaults)).summary()}", file=sys.stderr)
    idx.close()
    return Backend(settings, no_daemon=True, quiet=True)


def ask(backend: Backend, text: str, agent: str) -> list[dict]:
    return prompt_hits(backend, backend.settings, text, min_relevance=0, agent=agent)[0]  # gates applied below


BY = "relevance"


def measure(hit: dict) -> float:
    return hit.get("relevance") or 0.0 if BY == "relevance" else hit["explain"].get("cosine", -1.0)


def kept(hits: list[dict], gate: float) -> list[dict]:
    """The hits the hook would show: those that reach the gate (0: all)."""
    return [h for h in hits if not gate or measure(h) >= gate]


def pct(xs: list[float], p: int) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, help="only the first N queries of each set")
    ap.add_argument("--k", type=int, default=3, help="hits the hook looks at (default 3)")
    ap.add_argument("--state-root", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--by", choices=["relevance", "cosine"], default="relevance", help="what the gate reads")
    ap.add_argument("--agent", choices=["claude", "codex"], default="claude",
                    help="whose hook: what it passes over (default claude)")
    args = ap.parse_args()
    global BY
    BY = args.by
    state_root = Path(args.state_root)
    off = open_backend("claude-corpus", state_root, args.k)
    for name, qfile in QUERIES.items():
        rows = [json.loads(line) for line in qfile.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if r.get("relevant_note_ids")][: args.limit]
        on = open_backend(name, state_root, args.k)
        on_hits = [(ask(on, r["query"], args.agent), set(r["relevant_note_ids"])) for r in rows]
        off_hits = [ask(off, r["query"], args.agent) for r in rows]
        on.close()
        on_top = [max(map(measure, h), default=0.0) for h, _ in on_hits]
        off_top = [max(map(measure, h), default=0.0) for h in off_hits]
        print(f"\n{name}: {len(rows)} questions, best {BY} among the hits the hook looks at")
        print("  on topic   p5 {:.3f}  p10 {:.3f}  p50 {:.3f}".format(*(pct(on_top, p) for p in (5, 10, 50))))
        print("  off topic  p50 {:.3f}  p90 {:.3f}  p95 {:.3f}".format(*(pct(off_top, p) for p in (50, 90, 95))))
        print(f"  {'gate':>5}  {'on: any note':>12}  {'on: a relevant one':>18}  {'off: any note':>13}")
        for g in GATES[BY]:
            any_on = sum(bool(kept(h, g)) for h, _ in on_hits) / len(rows)
            rel_on = sum(any(h["path"][:-3] in rel for h in kept(hs, g)) for hs, rel in on_hits) / len(rows)
            any_off = sum(bool(kept(h, g)) for h in off_hits) / len(rows)
            print(f"  {g:5.3f}  {any_on:12.3f}  {rel_on:18.3f}  {any_off:13.3f}")
        print(f"  (median best {BY} on/off: {statistics.median(on_top):.3f} / {statistics.median(off_top):.3f})")
    off.close()


if __name__ == "__main__":
    main()
