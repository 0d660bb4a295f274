"""An HNSW index of its own for each big namespace (tenant), kept by a periodic job.

One HNSW index over a table holding many tenants serves a small tenant badly: pgvector's iterative scan checks
the namespace of every index entry it visits against the heap, and a tenant holding 1 % of a million rows costs
thousands of random heap reads per query (BENCHMARKS.md "PostgreSQL 18 and pgvector 0.8": p95 158 ms for those
tenants). pgvector's documented answer is a partial index per filter value. So:

* a namespace with at least `retrieval.tenant_index_min_rows` rows of `memories`, `episodes` or `rounds`, and less
  than `retrieval.tenant_index_max_share` of the table (a namespace that is most of the table is served as well
  by the table's own index), gets `CREATE INDEX CONCURRENTLY ix_<table>_ns_<hash> … WHERE namespace = '<ns>'`;
* one that falls below half the threshold (erased, forgotten) loses it, so a namespace at the threshold does
  not flap; an index a failed build left invalid is dropped and built again;
* recall asks whether the namespace has a valid index of its own (cached with its sizes, a minute) and then
  names the namespace as a literal in the vector query, which is what lets PostgreSQL's planner match the
  partial index (`recall_repository.VectorPlan` mode `tenant`).

Builds never block writers (CONCURRENTLY), run one at a time across the cluster (an advisory lock), and a
crash leaves at worst an invalid index that the next run replaces. Every write to a big tenant's rows then
updates two HNSW indexes, its own and the table's.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog
from psycopg import sql
from sqlalchemy import Connection, Engine, text

from hindsight.config import RetrievalSettings

log = structlog.get_logger(__name__)

TABLES = ("memories", "episodes", "rounds")
# pg_try_advisory_lock key of the job ("hindsight tenant indexes").
_LOCK_KEY = 0x68696E7464
_OPTION_RE = re.compile(r"^[a-z_]+=\d+$")


def index_name(table: str, namespace: str) -> str:
    """The name of `namespace`'s own index on `table` (a hash: a namespace may hold any character)."""
    assert table in TABLES
    return f"ix_{table}_ns_{hashlib.sha256(namespace.encode()).hexdigest()[:24]}"


@dataclass
class TenantIndexReport:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    kept: int = 0
    skipped: bool = False
    """Another run held the lock."""
    seconds: float = 0.0


@dataclass(frozen=True)
class _Plan:
    create: list[tuple[str, str]]  # (namespace, index name)
    drop: list[str]
    keep: int


def plan_indexes(
    counts: dict[str, int], total: int, existing: dict[str, bool], table: str, *, min_rows: int, max_share: float
) -> _Plan:
    """What to build and drop on `table`, from its namespaces' row counts (those with at least half of
    `min_rows`), its total rows, and its tenant indexes now (name -> valid)."""
    create, keep = [], set()
    for ns, rows in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        name = index_name(table, ns)
        if existing.get(name):
            if rows >= min_rows // 2:
                keep.add(name)
        elif rows >= min_rows and rows < max_share * max(total, rows):
            create.append((ns, name))
    drop = sorted(n for n in existing if n not in keep)
    return _Plan(create=create, drop=drop, keep=len(keep))


def _existing(conn: Connection, table: str) -> dict[str, bool]:
    rows = conn.execute(
        text(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = CAST(:t AS regclass) AND starts_with(c.relname, :prefix)"
        ),
        {"t": table, "prefix": f"ix_{table}_ns_"},
    ).all()
    return {str(name): bool(valid) for name, valid in rows}


def _counts(conn: Connection, table: str, at_least: int) -> tuple[dict[str, int], int]:
    counts = conn.execute(
        text(f"SELECT namespace, count(*) FROM {table} GROUP BY namespace HAVING count(*) >= :n"),
        {"n": max(1, at_least)},
    ).all()
    total = conn.execute(
        text("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": table}
    ).scalar_one()
    out = {str(ns): int(n) for ns, n in counts}
    return out, max(int(total), sum(out.values()))


def _table_index_options(conn: Connection, table: str) -> str:
    """The build options (m, ef_construction) of the table's own HNSW index, which migrations define: a tenant's
    index is built the same way."""
    options = conn.execute(
        text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:ix)"), {"ix": f"ix_{table}_embedding_hnsw"}
    ).scalar()
    kept = [o for o in options or [] if _OPTION_RE.match(o)]
    return f" WITH ({', '.join(kept)})" if kept else ""


def _create(conn: Connection, table: str, namespace: str, name: str) -> None:
    # psycopg composes the DDL (the namespace as a quoted literal) and runs it itself: no parameter markers to
    # misread in a namespace, and CONCURRENTLY runs outside a transaction (the connection is in autocommit).
    driver = conn.connection.driver_connection
    assert driver is not None
    ddl = sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw (embedding halfvec_cosine_ops)"
        + _table_index_options(conn, table)
        + " WHERE namespace = {}"
    ).format(sql.Identifier(name), sql.Identifier(table), sql.Literal(namespace))
    driver.execute(ddl)


def _drop(conn: Connection, name: str) -> None:
    conn.exec_driver_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')


def maintain_tenant_indexes(
    engine: Engine,
    settings: RetrievalSettings,
    *,
    tables: Sequence[str] = TABLES,
    on_step: Callable[[str, str], None] | None = None,
) -> TenantIndexReport:
    """Build the indexes big namespaces lack and drop those of namespaces that shrank (module docstring).
    `on_step(action, index name)` is called before each build or drop (progress). Safe to run twice, or
    beside writers and readers."""
    report = TenantIndexReport()
    if not settings.tenant_indexes:
        return report
    started = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _LOCK_KEY}).scalar_one():
            report.skipped = True
            return report
        try:
            conn.exec_driver_sql(f"SET maintenance_work_mem = '{int(settings.tenant_index_build_mb)}MB'")
            for table in tables:
                existing = _existing(conn, table)
                counts, total = _counts(conn, table, settings.tenant_index_min_rows // 2)
                todo = plan_indexes(
                    counts,
                    total,
                    existing,
                    table,
                    min_rows=settings.tenant_index_min_rows,
                    max_share=settings.tenant_index_max_share,
                )
                for name in todo.drop:
                    if on_step:
                        on_step("drop", name)
                    _drop(conn, name)
                    report.dropped.append(name)
                for ns, name in todo.create:
                    if on_step:
                        on_step("create", name)
                    _create(conn, table, ns, name)
                    report.created.append(name)
                report.kept += todo.keep
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
    report.seconds = round(time.perf_counter() - started, 3)
    if report.created or report.dropped:
        log.info("tenant_indexes.done", created=len(report.created), dropped=len(report.dropped), kept=report.kept,
                 seconds=report.seconds)  # fmt: skip
    return report


def drop_tenant_indexes(engine: Engine, table: str) -> int:
    """Drop every tenant index of `table` (benchmarks, before a bulk load)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        names = list(_existing(conn, table))
        for name in names:
            _drop(conn, name)
    return len(names)
