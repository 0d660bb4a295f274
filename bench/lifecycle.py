"""The lifecycle job (active -> stale -> archived) over a big table: wall time, and whether its cost follows the
rows that change or the size of the table (issue #14).

    .venv/bin/python bench/lifecycle.py [--sizes 100000,1000000] [--due 10000]

A move should be a HOT update (no indexed column of `memories` changes; the due time lives in `lifecycle_due`):
`hot_update_share` says how many were.

For each size it starts a fresh embedded PostgreSQL (a temporary directory), COPYs that many memories into one
table (100 namespaces, the eight kinds, no embeddings: the job never reads them), verified a day ago except
`--due` of them, verified 400 days ago (past every stale window), then runs `run_lifecycle` once, as beat's
task does, and times it. The same number of rows is due at every size: if the job's cost followed the rows
that change, its time would not grow with the table.

Prints progress to stderr and one JSON line to stdout.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sqlalchemy as sa  # noqa: E402

from tests.faults.conftest import start_fault_services, stop_fault_services  # noqa: E402

KINDS = ("preference", "fact", "profile", "project", "decision", "habit", "relationship", "observation")
COLUMNS = (
    "id, namespace, kind, key, value, subject, source, confidence, state, pinned, negated, has_conflict, "
    "also_slots, search_text, search_vocab, backend, embedding_model, created_at, updated_at, last_verified_at, "
    "state_changed_at, embedding"
)
DIM = 8
"""The job never reads embeddings, but every index is kept (an update that moves a row writes index entries):
small random vectors keep the HNSW index real and the load quick."""


def _load(url: str, rows: int, due: int, now: datetime) -> None:
    import numpy as np
    import psycopg

    fresh, old = now - timedelta(days=1), now - timedelta(days=400)
    rng = np.random.default_rng(0)
    every = max(1, rows // due)
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        # Indexes are built once after the load, not row by row during it (the same indexes, as migrated).
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories' AND indexname NOT LIKE 'pk_%'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        with conn.cursor().copy(f"COPY memories ({COLUMNS}) FROM STDIN") as copy:
            for i in range(rows):
                kind = KINDS[i % len(KINDS)]
                at = old if i % every == 0 and i // every < due else fresh
                copy.write_row(
                    (
                        uuid.uuid4(),
                        f"ns-{i % 100}",
                        kind,
                        f"user.{kind}_{i % 7}",
                        f"User fact number {i}",
                        "user",
                        "user",
                        0.75,
                        "active",
                        False,
                        False,
                        False,
                        "[]",
                        f"fact number {i}",
                        "v1",
                        "bench",
                        "bench",
                        at,
                        at,
                        at,
                        at,
                        "[" + ",".join(f"{x:.3f}" for x in rng.standard_normal(DIM)) + "]",
                    )
                )
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute("ANALYZE memories")
        conn.commit()


def main(
    sizes: Annotated[str, typer.Option(help="Table sizes, comma-separated.")] = "100000,1000000",
    due: Annotated[int, typer.Option(help="Memories past their stale window, at every size.")] = 10000,
) -> None:
    from hindsight.config import LifecycleSettings
    from hindsight.db.engine import session_scope
    from hindsight.services.lifecycle import run_lifecycle

    def say(msg: str) -> None:
        print(f"[lifecycle] {msg}", file=sys.stderr, flush=True)  # noqa: T201

    report: dict[str, Any] = {"bench": "lifecycle", "due": due, "runs": []}
    now = datetime.now(UTC)
    for size in [int(s) for s in sizes.split(",") if s.strip()]:
        with tempfile.TemporaryDirectory(prefix="hs-lifecycle-") as tmp:
            svc = start_fault_services(Path(tmp), embedding_dim=DIM)
            try:
                t0 = time.monotonic()
                _load(svc.database_url, size, due, now)
                loaded = time.monotonic() - t0
                say(f"{size} memories loaded in {loaded:.0f} s")
                engine = sa.create_engine(svc.database_url)
                settings = LifecycleSettings()
                t0 = time.monotonic()
                with session_scope(engine) as session:
                    moved = run_lifecycle(session, settings, now=now)
                took = time.monotonic() - t0
                time.sleep(1.0)  # statistics reach pg_stat_user_tables within a second of the commit
                with engine.connect() as conn:
                    stale = conn.execute(sa.text("SELECT count(*) FROM memories WHERE state = 'stale'")).scalar_one()
                    updated, hot = conn.execute(
                        sa.text("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memories'")
                    ).one()
                engine.dispose()
                run = {
                    "memories": size,
                    "moved": moved.stale,
                    "stale_after": int(stale),
                    "batches": -(-moved.stale // settings.batch_size),
                    "seconds": round(took, 2),
                    "hot_update_share": round(hot / updated, 3) if updated else None,
                    "load_seconds": round(loaded, 1),
                }
                say(json.dumps(run))
                report["runs"].append(run)
            finally:
                stop_fault_services(svc)
    typer.echo(json.dumps(report))


if __name__ == "__main__":
    typer.run(main)
