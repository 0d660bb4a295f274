"""Full text indexed per namespace: each lexeme keyed with its namespace, so a term's posting list is one tenant's.

0012 put the namespace in the GIN index as its own column (btree_gin). A GIN index keeps each column's keys
apart, so PostgreSQL still answered `namespace = X AND content_tsv @@ 'team':*` by decoding the posting lists of
`team` over every namespace and intersecting them with X's rows. At 1M memories over 10,000 namespaces that cost
30-40 ms for a common word in a namespace of 61 rows, and 47 ms in one of 9,000 (BENCHMARKS.md "Keyword search
per namespace").

* `hindsight_ns_lexemes(namespace, content_tsv)`: the row's lexemes, each prefixed with the first 12 hex digits of
  the namespace's MD5 (a lexeme too long to take the prefix is left out of this index, not of the row);
* `hindsight_ns_query(namespace, tsquery)`: the same prefix on every lexeme of a query, operators and prefix
  matches (`:*`) kept;
* one GIN index per searched table on `hindsight_ns_lexemes(namespace, content_tsv)`, `ix_<table>_namespaced_tsv`,
  in place of 0012's (`ix_<table>_ns_…` names a tenant's own index, which the tenant-index job keeps or drops).

A keyword query then reads only its namespace's posting lists. Two namespaces whose hashes share 12 hex digits
would share posting lists: the query still filters by namespace, so that costs time, never a wrong row.

Revision ID: 0015_namespace_lexemes
Revises: 0014_memory_access
Create Date: 2026-12-09 09:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015_namespace_lexemes"
down_revision: str | None = "0014_memory_access"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("memories", "episodes", "rounds")

LEXEMES = """
CREATE FUNCTION hindsight_ns_lexemes(ns text, tsv tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(
        SELECT left(md5(ns), 12) || lexeme FROM unnest(tsvector_to_array(tsv)) AS lexeme
        WHERE octet_length(lexeme) <= 2000
    ))
$$
"""
# A tsquery's text form quotes each lexeme ('team':* & 'qx-48213'), doubling a quote inside it.
QUERY = """
CREATE FUNCTION hindsight_ns_query(ns text, q tsquery) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT regexp_replace(q::text, '''((?:[^'']|'''')*)''', '''' || left(md5(ns), 12) || '\\1''', 'g')::tsquery
$$
"""


def upgrade() -> None:
    op.execute(LEXEMES)
    op.execute(QUERY)
    for table in TABLES:
        op.execute(
            f"CREATE INDEX ix_{table}_namespaced_tsv ON {table}"
            " USING gin (hindsight_ns_lexemes(namespace, content_tsv))"
        )
        op.drop_index(f"ix_{table}_namespace_tsv", table_name=table)


def downgrade() -> None:
    for table in TABLES:
        op.create_index(f"ix_{table}_namespace_tsv", table, ["namespace", "content_tsv"], postgresql_using="gin")
        op.drop_index(f"ix_{table}_namespaced_tsv", table_name=table)
    op.execute("DROP FUNCTION hindsight_ns_query(text, tsquery)")
    op.execute("DROP FUNCTION hindsight_ns_lexemes(text, tsvector)")
