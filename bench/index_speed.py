#!/usr/bin/env python3
"""Indexing throughput against the embedder alone, and the cost of a no-change re-index.

    python bench/index_speed.py [--vault DIR]    (default ../shared/eval/locomo-dev/turns/vault)

1. embeds every chunk text of the vault with the bundled embedder alone (warm model);
2. indexes the vault from scratch into a temp state dir (same warm model, LanceDB already
   imported: each is a once-per-process cost, printed apart);
3. re-indexes it unchanged, in process and as a fresh `vaultmem index` process.
Prints seconds, chunks/s and the ratio full-index / embedder-alone (target: <= 1.3).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vaultmem.config import resolve  # noqa: E402
from vaultmem.embedders import make_embedder  # noqa: E402
from vaultmem.index import VaultIndex  # noqa: E402
from vaultmem.notes import embed_text, parse_note  # noqa: E402
from vaultmem.scan import scan_vault  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", default=str(ROOT.parent / "shared/eval/locomo-dev/turns/vault"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.toml"
        cfg.write_text('[index]\ninclude = ["**/*.md"]\n')
        settings = resolve({"config": str(cfg), "state_dir": f"{tmp}/state", "vaults": [args.vault]}, env={})
        vault = settings.vaults[0]
        files = scan_vault(vault, settings.index.include, settings.index.exclude)
        texts = []
        for f in files.values():
            n = parse_note(vault.name, f.path, Path(f.abspath).read_bytes(), chunk_chars=settings.index.chunk_chars)
            texts.extend(embed_text(n, c) for c in n.chunks)
        emb = make_embedder(settings.embedder)
        emb.embed(texts[:64])  # warm up: load weights and tokenizer
        t = time.perf_counter()
        emb.embed(texts)
        alone = time.perf_counter() - t
        print(f"embedder alone : {len(texts)} chunks in {alone:.2f}s ({len(texts) / alone:.0f} chunks/s)")

        with VaultIndex(settings, writable=True) as idx:
            idx._embedder = emb  # the same warm model, so the comparison is fair
            t = time.perf_counter()
            _ = idx.vectors  # and the vector engine open, as the model is loaded: once per process
            print(f"open LanceDB   : {time.perf_counter() - t:.2f}s (import and table; once per process, not in the ratio)")
            t = time.perf_counter()
            report = idx.sync([vault])
            full = time.perf_counter() - t
            print(f"full index     : {report.files} files, {report.chunks_embedded} chunks in {full:.2f}s "
                  f"({report.chunks_embedded / full:.0f} chunks/s); ratio to embedder alone {full / alone:.2f}x")
            t = time.perf_counter()
            report = idx.sync([vault])
            print(f"no-change sync : {report.unchanged} unchanged in {(time.perf_counter() - t) * 1000:.1f} ms (in process)")
        cmd = [str(Path(sys.executable).parent / "vaultmem"), "index", "--config", str(cfg), "--state-dir", f"{tmp}/state"]
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "XDG_CONFIG_HOME": tmp})
            runs.append(time.perf_counter() - t)
        print(f"no-change index: fresh `vaultmem index` process {min(runs):.2f}s best of 3 ({', '.join(f'{r:.2f}' for r in runs)})")


if __name__ == "__main__":
    main()
