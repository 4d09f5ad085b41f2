#!/usr/bin/env python3
"""The in-memory vector search's coarse scan against the exact scan of every row, on real tables.

    python bench/coarse_scan.py [LANCE_DIR ...] [--queries 200]

For each vector table (by default those bench/eval.py made under bench/out/, and any state's
`lance` directory given, such as a bench/scale.py run's), real queries are embedded (the eval
set's questions, or bench/vaultgen.py's queries for other tables) and answered by
vaultmem.vectors.Vectors twice: as it is (past COARSE_RERANK rows, a coarse scan then an exact
score of the best rows) and with the coarse scan turned off (every row scored exactly). Prints
per table the rows, the median query time of each, and how much of the exact top 100 and top 10
the coarse scan returns, in the same order for the top 10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

from vaultgen import queries as generated_queries  # noqa: E402

from vaultmem import vectors  # noqa: E402
from vaultmem.config import resolve  # noqa: E402
from vaultmem.embedders import make_embedder  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval"
QUESTIONS = {"locomo-turns": EVAL / "locomo-dev" / "turns", "locomo-session": EVAL / "locomo-dev" / "session",
             "jsquad": EVAL / "jsquad", "korquad-dev": EVAL / "korquad-dev", "longmemeval-ku": EVAL / "longmemeval-ku"}


def questions_for(lance: Path, n: int) -> list[str]:
    for name, folder in QUESTIONS.items():
        if lance.parent.name.startswith(name + "-") and (folder / "queries.jsonl").is_file():
            rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
            return [r["query"] for r in rows][:n]
    return generated_queries(n)


def answers(table: vectors.Vectors, qs: np.ndarray, k: int) -> tuple[list[list[str]], float]:
    table.search(qs[0], k)  # the in-memory copy is made
    got, ms = [], []
    for q in qs:
        t = time.perf_counter()
        got.append([c for c, _, _ in table.search(q, k)])
        ms.append((time.perf_counter() - t) * 1000)
    return got, statistics.median(ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lance", nargs="*", type=Path, help="a state's lance directory (default: bench/out/*/lance)")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    tables = args.lance or sorted(p for p in (ROOT / "bench" / "out").glob("*/lance") if (p / "chunks.lance").is_dir())
    embedder = make_embedder(resolve({"state_dir": str(ROOT / "bench" / "out" / "none")}, env={}).embedder)
    print("| table | rows | as it is | every row scored | top 100 found | top 10 found | top 10 same order |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for lance in tables:
        meta = {k.decode(): v.decode() for k, v in
                vectors.lancedb.connect(str(lance)).open_table(vectors.TABLE).schema.metadata.items()}
        qs = embedder.embed_query(questions_for(lance, args.queries))

        def table(lance: Path = lance, meta: dict = meta) -> vectors.Vectors:
            return vectors.Vectors(lance, meta["embedder"], int(meta["dim"]), meta.get("dtype", "float16"), writable=False)

        coarse, coarse_ms = answers(table(), qs, 100)
        keep, vectors.COARSE_RERANK = vectors.COARSE_RERANK, 1 << 40  # every row scored exactly
        try:
            exact, exact_ms = answers(table(), qs, 100)
        finally:
            vectors.COARSE_RERANK = keep
        found100 = statistics.mean(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(coarse, exact))
        found10 = statistics.mean(len(set(a[:10]) & set(b[:10])) / max(1, len(b[:10])) for a, b in zip(coarse, exact))
        same = sum(a[:10] == b[:10] for a, b in zip(coarse, exact))
        name = lance.parent.name if lance.parent.name != "state" else lance.parent.parent.name
        print(f"| {name} | {table().count()} | {coarse_ms:.2f} ms | {exact_ms:.2f} ms | {found100:.4f} "
              f"| {found10:.4f} | {same} of {len(qs)} |", flush=True)


if __name__ == "__main__":
    main()
