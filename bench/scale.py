#!/usr/bin/env python3
"""How vaultmem grows with the vault, and how it fares on a busy laptop: for each size (vaults
made by bench/vaultgen.py: English, Korean and Japanese notes in topic chains), with no other
load and with one busy process (a spinning Python loop: an IDE indexing, a build), a daemon
started on a fresh state directory is measured for

- first index: start to ready (every note searchable by its words), and start to every vector
  embedded (searchable by meaning too; the same moment when vectors are not filled in later),
  wall time; the queries below are asked after both;
- warm hybrid and text queries through the socket (median of --queries);
- a fresh `vaultmem query` process end to end (median of 20);
- restart on the unchanged vault: start to ready;
- the state directory against the notes' size;
- the daemon's RSS after the restart and 50 queries, and its peak during the first index.

    python bench/scale.py [--sizes 1000,10000,50000] [--busy 0,1] [--out bench/out/scale]

It prints one table row per (size, busy) as it goes, and the table at the end. A 50,000-note
first index takes about ten minutes (twenty with a busy process).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
# the daemons and fresh queries run this tree's vaultmem, whichever is installed (to compare
# two versions, run each one's bench/scale.py)
os.environ["PYTHONPATH"] = str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")

from daemon_bench import FRESH_ENV, Daemon, warm_queries  # noqa: E402
from vaultgen import make_vault, queries  # noqa: E402

from vaultmem.client import Client, call  # noqa: E402


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def peak_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    get = lambda k: int(next(ln for ln in status.splitlines() if ln.startswith(k)).split()[1]) / 1024  # noqa: E731
    return get("VmRSS:"), get("VmHWM:")


def settle(sock: Path, quiet: float = 2.0) -> None:
    """Wait until the daemon's reader has stayed the same for `quiet` seconds."""
    last, since = None, time.perf_counter()
    while time.perf_counter() - since < quiet:
        gen = call(str(sock), {"op": "status"})["generation"]
        if gen != last:
            last, since = gen, time.perf_counter()
        time.sleep(0.1)


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def measure(out: Path, notes: int, busy: int, n_queries: int) -> dict:
    vault = out / f"v{notes}"
    if make_vault(vault, notes, topics=max(1, notes * 3 // 10)):
        print(f"# generated {notes} notes in {vault}", flush=True)
    run = out / f"run-{notes}-{busy}"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    state, sock = run / "state", Path(f"/tmp/vaultmem-scale-{os.getpid()}/v.sock")
    qs = queries(n_queries)
    loops = busy_loops(busy)
    d = Daemon(vault, state, sock, run / "daemon.log")
    row: dict = {"notes": notes, "busy": busy}
    try:
        t0 = time.perf_counter()
        row["first_index_s"] = d.start()
        while call(str(sock), {"op": "status"}).get("vectors_to_embed"):  # 0 or absent: every vector is in
            time.sleep(0.1)
        row["vectors_s"] = time.perf_counter() - t0
        settle(sock)  # the compaction that follows a bulk load, before queries are timed
        row["peak_mb"] = peak_mb(d.proc.pid)[1]
        status = call(str(sock), {"op": "status"})
        row["chunks"] = status["chunks"]
        with Client(str(sock)) as c:
            warm_queries(c, qs[:20])
            row["hybrid_ms"] = statistics.median(warm_queries(c, qs))
            text = []
            for q in qs:
                t = time.perf_counter()
                c.request({"op": "query", "text": q, "k": 10, "mode": "text"})
                text.append((time.perf_counter() - t) * 1000)
            row["text_ms"] = statistics.median(text)
        exe = str(Path(sys.executable).parent / "vaultmem")
        fresh = []
        for i, q in enumerate(qs[:21]):
            t = time.perf_counter()
            subprocess.run([exe, "query", q, "--socket", str(sock), "--json"], capture_output=True, check=False,
                           env=FRESH_ENV)
            fresh += [(time.perf_counter() - t) * 1000] if i else []  # the first one writes the bytecode
        row["fresh_ms"] = statistics.median(fresh)
        d.stop()
        row["restart_s"] = d.start()
        with Client(str(sock)) as c:
            warm_queries(c, qs[:50])
        row["rss_mb"], row["restart_peak_mb"] = peak_mb(d.proc.pid)
        d.stop()
        row["state_ratio"] = size_mb(state) / size_mb(vault / "memory")
        row["state_mb"] = size_mb(state)
    finally:
        if getattr(d, "proc", None) is not None and d.proc.poll() is None:
            d.stop()
        for p in loops:
            p.kill()
            p.wait()
    return row


COLUMNS = [("notes", "notes", "{}"), ("busy", "busy", "{}"), ("searchable", "first_index_s", "{:.1f} s"),
           ("all vectors", "vectors_s", "{:.1f} s"),
           ("warm hybrid", "hybrid_ms", "{:.1f} ms"), ("warm text", "text_ms", "{:.1f} ms"),
           ("fresh query", "fresh_ms", "{:.0f} ms"), ("restart", "restart_s", "{:.2f} s"),
           ("state", "state_mb", "{:.1f} MB"), ("state/notes", "state_ratio", "{:.1f}x"),
           ("RSS", "rss_mb", "{:.0f} MB"), ("peak at first index", "peak_mb", "{:.0f} MB"),
           ("peak at restart", "restart_peak_mb", "{:.0f} MB")]


def line(row: dict) -> str:
    return "| " + " | ".join(fmt.format(row[key]) if key in row else "-" for _, key, fmt in COLUMNS) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--busy", default="0,1", help="busy processes beside the daemon, each case in turn")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=str(HERE / "out/scale"))
    args = ap.parse_args()
    out = Path(args.out)
    header = "| " + " | ".join(name for name, _, _ in COLUMNS) + " |\n|" + " --- |" * len(COLUMNS)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores", flush=True)
    print(header, flush=True)
    rows = []
    for notes in (int(s) for s in args.sizes.split(",")):
        for busy in (int(b) for b in args.busy.split(",")):
            rows.append(measure(out, notes, busy, args.queries))
            print(line(rows[-1]), flush=True)
    print("\n" + header)
    print("\n".join(line(r) for r in rows))


if __name__ == "__main__":
    main()
