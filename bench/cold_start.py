#!/usr/bin/env python3
"""What a fresh process pays before it can embed: the cost every `vaultmem index`, daemon start
with changes, and query or MCP recall without a daemon pays once.

    python bench/cold_start.py [--vault DIR] [--runs N]    (default vault-example/)

Indexes a copy of the vault into a temp state dir, then, each as a new process, N times:
1. the bundled model loaded (`UseEmbedder()`, with the user's cache of it warm);
2. `vaultmem query --no-daemon` (hybrid: LanceDB, the model, the query);
3. `vaultmem index` after one note was appended to (one chunk re-embedded).
Prints the median and the range of each, in seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", default=str(ROOT / "vault-example"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cli = [sys.executable, "-m", "vaultmem.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        vault, state = Path(tmp) / "vault", Path(tmp) / "state"
        shutil.copytree(args.vault, vault, symlinks=True)
        env = {**os.environ, "XDG_CONFIG_HOME": tmp}
        index = cli + ["index", "--vault", f"v={vault}", "--state-dir", str(state)]
        subprocess.run(index, check=True, capture_output=True, env=env, cwd=tmp)
        note = next(p for p in sorted(vault.rglob("*.md")) if "memory" in p.parts)
        figures: dict[str, list[float]] = {"model load": [], "query --no-daemon": [], "index, one note changed": []}
        load = [sys.executable, "-c", "from vaultmem.embedders import UseEmbedder; UseEmbedder()"]
        query = cli + ["query", "how do we deploy", "--state-dir", str(state), "--no-daemon"]
        for i in range(args.runs):
            figures["model load"].append(timed(load, env))
            figures["query --no-daemon"].append(timed(query, env))
            with open(note, "a", encoding="utf-8") as f:
                f.write(f"\nedit {i}\n")
            figures["index, one note changed"].append(timed(index, env))
        for name, runs in figures.items():
            print(f"{name:24}: median {statistics.median(runs):.2f}s (range {min(runs):.2f}-{max(runs):.2f}, "
                  f"{len(runs)} fresh processes)")


if __name__ == "__main__":
    main()
