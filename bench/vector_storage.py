"""How to store and scan embeddings on pgvector 0.8: column type, storage, and the iterative scan's settings.

    .venv/bin/python bench/vector_storage.py [--rows 100000] [--namespaces 10] [--queries 200]

On an embedded PostgreSQL of its own (temp dir), three tables hold the same `--rows` unit vectors (512 dims,
clustered: `--centres` random centres plus noise, so neighbourhoods are dense as real memory embeddings are),
spread evenly over `--namespaces` namespaces, each with a B-tree on the namespace and an HNSW index (m 16,
ef_construction 64, as the migrations build them):

- `vector`   vector(512) with pgvector's default storage (EXTERNAL: a 2,056-byte value passes PostgreSQL's
             2 kB TOAST threshold, so every row keeps its vector out of line);
- `main`     vector(512) with STORAGE MAIN (kept in the row unless the row outgrows a page);
- `halfvec`  halfvec(512): half-precision, 1,032 bytes, in the row; index on halfvec_cosine_ops.

For each query (a perturbed row vector, in one namespace chosen round-robin) it times, after a warm-up:
the exact scan of the namespace, and the namespace-filtered index query under `hnsw.iterative_scan`
relaxed_order and strict_order at several ef_search values; recall@10 of each against the exact float
neighbours of the namespace. It prints a table and one JSON line (sizes of heap, TOAST and index included).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

if TYPE_CHECKING:
    from psycopg import Cursor

console = Console(stderr=True)
TABLES = {
    "vector": ("vector", "vector_cosine_ops"),
    "main": ("vector", "vector_cosine_ops"),
    "halfvec": ("halfvec", "halfvec_cosine_ops"),
}


def vectors(n: int, dim: int, centres: int, rng: np.random.Generator) -> np.ndarray:
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    v = c[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def lit(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6g}" for x in v) + "]"


def ms_summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50": round(statistics.median(xs), 2), "p95": round(xs[int(0.95 * (len(xs) - 1))], 2)}


def _one(cursor: Cursor[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The one row of a query that always returns one (`fetchone` is typed as possibly None)."""
    row = cursor.fetchone()
    assert row is not None
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=10)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--centres", type=int, default=2000)
    ap.add_argument("--ef", default="40,100", help="ef_search values for the iterative scans")
    args = ap.parse_args(argv)
    import psycopg
    from pgvector.psycopg import register_vector

    from hindsight.local_servers import start_postgres, stop_postgres

    tmp = Path(tempfile.mkdtemp(prefix="hindsight-bench-vstore-"))
    os.chmod(tmp, 0o755)  # the embedded server runs postgres as its own user when started by root
    rng = np.random.default_rng(3)
    dim = 512
    data = vectors(args.rows, dim, args.centres, rng)
    ns_of = np.arange(args.rows) % args.namespaces
    out: dict[str, Any] = {"rows": args.rows, "namespaces": args.namespaces}
    try:
        url = start_postgres(tmp / "pg").replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn, Progress(console=console) as progress:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            out["versions"] = {
                "postgres": _one(conn.execute("SHOW server_version"))[0],
                "pgvector": _one(conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'"))[0],
            }
            for name, (typ, ops) in TABLES.items():
                t = progress.add_task(f"fill + index {name}", total=None)
                conn.execute(f"DROP TABLE IF EXISTS t_{name}")
                conn.execute(
                    f"CREATE TABLE t_{name} (id int PRIMARY KEY, namespace text, pad text, embedding {typ}({dim}))"
                )
                if name == "main":
                    conn.execute(f"ALTER TABLE t_{name} ALTER COLUMN embedding SET STORAGE MAIN")
                buf = io.StringIO()
                for i in range(args.rows):
                    buf.write(f"{i}\tns-{ns_of[i]:05d}\t{'x' * 120}\t{lit(data[i])}\n")
                with conn.cursor().copy(f"COPY t_{name} (id, namespace, pad, embedding) FROM STDIN") as cp:
                    cp.write(buf.getvalue())
                t0 = time.perf_counter()
                conn.execute("SET maintenance_work_mem = '1GB'")
                conn.execute(f"CREATE INDEX ON t_{name} (namespace)")
                conn.execute(
                    f"CREATE INDEX ON t_{name} USING hnsw (embedding {ops}) WITH (m = 16, ef_construction = 64)"
                )
                conn.execute(f"ANALYZE t_{name}")
                out.setdefault("index_build_s", {})[name] = round(time.perf_counter() - t0, 1)
                sizes = _one(
                    conn.execute(
                        "SELECT pg_relation_size(c.oid), coalesce(pg_relation_size(c.reltoastrelid), 0),"
                        " pg_indexes_size(c.oid) FROM pg_class c WHERE relname = %s",
                        (f"t_{name}",),
                    )
                )
                out.setdefault("mb", {})[name] = {
                    k: round(s / 2**20, 1) for k, s in zip(("heap", "toast", "indexes"), sizes, strict=True)
                }
                progress.update(t, total=1, completed=1)

            qs = data[rng.integers(0, args.rows, args.queries)] + (0.3 / dim**0.5) * rng.standard_normal(
                (args.queries, dim)
            ).astype(np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            q_ns = [f"ns-{i % args.namespaces:05d}" for i in range(args.queries)]
            truth = []
            for q, ns in zip(qs, q_ns, strict=True):
                idx = np.flatnonzero(ns_of == int(ns[3:]))
                truth.append(set(idx[np.argsort(-(data[idx] @ q))[:10]].tolist()))

            variants: list[tuple[str, str, str | None, int]] = []
            for name in TABLES:
                variants.append((f"{name} exact", name, None, 40))
                for ef in [int(x) for x in args.ef.split(",")]:
                    for scan_order in ("relaxed_order", "strict_order"):
                        variants.append((f"{name} {scan_order.split('_')[0]} ef{ef}", name, scan_order, ef))
            results: dict[str, Any] = {}
            t = progress.add_task("queries", total=len(variants) * args.queries)
            for label, name, order, ef in variants:
                typ = TABLES[name][0]
                dist = f"embedding <=> CAST(%(q)s AS {typ})"
                order_by = f"({dist}) + 0" if order is None else dist
                sql = f"SELECT id FROM t_{name} WHERE namespace = %(ns)s ORDER BY {order_by} LIMIT 10"
                times, recalls = [], []
                with conn.transaction():
                    conn.execute(f"SET LOCAL hnsw.iterative_scan = {order or 'off'}")
                    conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    for q, ns in list(zip(qs, q_ns, strict=True))[:20]:
                        conn.execute(sql, {"q": lit(q), "ns": ns}).fetchall()
                    for q, ns, tr in zip(qs, q_ns, truth, strict=True):
                        t0 = time.perf_counter()
                        ids = [r[0] for r in conn.execute(sql, {"q": lit(q), "ns": ns}).fetchall()]
                        times.append((time.perf_counter() - t0) * 1000)
                        recalls.append(len(tr & set(ids)) / 10)
                        progress.advance(t)
                results[label] = {**ms_summary(times), "recall_at_10": round(statistics.fmean(recalls), 3)}
            out["queries"] = results
        table = Table(title=f"{args.rows:,} rows over {args.namespaces} namespaces, ms")
        for col in ("query", "p50", "p95", "recall@10"):
            table.add_column(col)
        for label, r in results.items():
            table.add_row(label, str(r["p50"]), str(r["p95"]), str(r["recall_at_10"]))
        console.print(table)
        console.print(out["mb"], out["index_build_s"])
    finally:
        stop_postgres(tmp / "pg")
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, sort_keys=True))  # noqa: T201 (the one JSON line on stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
