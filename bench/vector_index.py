#!/usr/bin/env python3
"""Vector search past the in-memory size: LanceDB's flat scan against its IVF_PQ index.

    python bench/vector_index.py [--rows 100000] [--out bench/out/vector-index]

Builds a table of --rows vectors through vaultmem's own Vectors class: the bench vault's real
embeddings (bench/out/d10k, made by bench/daemon_bench.py) with a little noise added to each
copy, or random unit vectors when that vault is not there. Then times 30 queries (median) with
LanceDB's flat scan, with numpy over the same matrix in memory (what vaultmem does up to
EXACT_MAX_ROWS), and, after Vectors.optimize() has built the index, through the index; and how
much of the exact top 10 the index finds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaultmem import vectors  # noqa: E402

DIM = 512


def source_vectors(rng: np.random.Generator) -> np.ndarray:
    lance = ROOT / "bench" / "out" / "d10k" / "state" / "lance"
    if (lance / "chunks.lance").is_dir():
        got = vectors.lancedb.connect(str(lance)).open_table("chunks").to_arrow()["vector"]
        print(f"vectors: the bench vault's {len(got)} embeddings, perturbed")
        return np.asarray(got.combine_chunks().flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, DIM)
    print("vectors: random (run bench/daemon_bench.py first for real embeddings)")
    return rng.normal(size=(10_000, DIM)).astype(np.float32)


def unit(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "vector-index"))
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    base = source_vectors(rng)
    copies = -(-args.rows // len(base))
    mat = unit(np.concatenate([base + rng.normal(0, 0.02, base.shape).astype(np.float32) for _ in range(copies)])[:args.rows])
    queries = unit(base[rng.choice(len(base), 30)] + rng.normal(0, 0.05, (30, DIM)).astype(np.float32))

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    v = vectors.Vectors(out, "bench", DIM)
    t = time.perf_counter()
    step = 10_000
    for i in range(0, args.rows, step):
        v.replace(set(), [(f"c{j}", f"bench:n{j}.md", f"h{j}", mat[j]) for j in range(i, min(args.rows, i + step))])
    print(f"table: {args.rows} rows written in {time.perf_counter() - t:.1f}s")
    vectors.EXACT_MAX_ROWS = min(vectors.EXACT_MAX_ROWS, args.rows - 1)  # so that LanceDB answers

    def timed(fn) -> tuple[float, list[list[str]]]:
        lat, got = [], []
        for q in queries:
            t = time.perf_counter()
            got.append(fn(q))
            lat.append((time.perf_counter() - t) * 1000)
        return statistics.median(lat[3:]), got

    flat_ms, exact = timed(lambda q: [c for c, _, _ in v.search(q, 100)])
    np_ms, _ = timed(lambda q: np.argpartition(-(mat @ q), 100)[:100])
    print(f"flat scan (LanceDB): {flat_ms:.1f} ms a query; numpy in memory: {np_ms:.1f} ms "
          f"({mat.nbytes >> 20} MB of float32)")
    t = time.perf_counter()
    v.optimize()
    print(f"index built by Vectors.optimize(): {time.perf_counter() - t:.0f}s (has index: {v.has_index()})")
    ann_ms, approx = timed(lambda q: [c for c, _, _ in v.search(q, 100)])
    found = statistics.mean(len(set(a[:10]) & set(e[:10])) / 10 for a, e in zip(approx, exact))
    print(f"index ({vectors.ANN_NPROBES} probes, refine x{vectors.ANN_REFINE}): {ann_ms:.1f} ms a query; "
          f"finds {found:.1%} of the exact top 10")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
