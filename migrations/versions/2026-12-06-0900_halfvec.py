"""pgvector 0.8 and half-precision embeddings.

* pgvector 0.8 or newer is required: its iterative index scans filter by namespace inside the HNSW scan
  (`hnsw.iterative_scan`), which replaced the over-fetch that 0.6 needed. An older installed extension is
  updated when the server has 0.8 available; otherwise this revision stops and says what to install.
* `memories`, `episodes` and `rounds` store their embedding as `halfvec` (2 bytes a dimension): a 512-dim value
  is 1,032 bytes and stays in its row, where a `vector` (2,056 bytes) passed PostgreSQL's 2 kB threshold and
  went out of line to TOAST, and the HNSW indexes are half the size. Measured in BENCHMARKS.md ("PostgreSQL 18
  and pgvector 0.8"): recall@10 unchanged against full-precision neighbours. The HNSW indexes are rebuilt on
  `halfvec_cosine_ops` with the same names and parameters.

The dimension is read from each column, so this revision imports no application code.

Revision ID: 0011_halfvec
Revises: 0010_rounds
Create Date: 2026-12-06 09:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_halfvec"
down_revision: str | None = "0010_rounds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("memories", "episodes", "rounds")
NEEDED = (0, 8)


def _version(v: str | None) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in (v or "0").split("."))


def pgvector_step(installed: str | None, available: str | None) -> str | None:
    """What the installed pgvector needs: None (it is new enough) or the SQL that updates it; raises when the
    server offers nothing new enough."""
    if _version(installed) >= NEEDED:
        return None
    if _version(available) >= NEEDED:
        return "ALTER EXTENSION vector UPDATE"
    raise RuntimeError(
        f"hindsight needs pgvector >= 0.8 (installed {installed}, the server offers {available}); install a newer "
        "pgvector on the server (the image pgvector/pgvector:pg18 has it) and run `hindsight migrate` again"
    )


def _require_pgvector_08() -> None:
    bind = op.get_bind()
    installed = bind.execute(sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    available = bind.execute(
        sa.text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    step = pgvector_step(installed, available)
    if step is not None:
        op.execute(step)


def _retype(table: str, type_name: str, ops: str) -> None:
    dim = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attname = 'embedding'"
            ),
            {"t": table},
        )
        .scalar_one()
    )
    op.drop_index(f"ix_{table}_embedding_hnsw", table_name=table)
    typ = f"{type_name}({int(dim)})"
    op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE {typ} USING embedding::{typ}")
    op.create_index(
        f"ix_{table}_embedding_hnsw",
        table,
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": ops},
    )


def upgrade() -> None:
    _require_pgvector_08()
    for table in TABLES:
        _retype(table, "halfvec", "halfvec_cosine_ops")


def downgrade() -> None:
    for table in TABLES:
        _retype(table, "vector", "vector_cosine_ops")
