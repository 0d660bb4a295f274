"""Access statistics in a table of their own, so that counting a recall never rewrites the memory row.

Recall counts each returned memory (`access_count`, `last_accessed_at`) and a background thread adds the counts
in one batched statement about once a second. That statement was an UPDATE of `memories`: rows of 1-2 kB (the
halfvec embedding, the value, the search text) leave a page room for about one new row version at fillfactor 80,
so once a page's room was used the update was no longer HOT and wrote a new entry into every index of
`memories`, the HNSW graphs included. It took 110-160 ms at 100k rows, and the queries beside it paid for it
(BENCHMARKS.md "Where the rest of recall goes").

* `memory_access (memory_id, access_count, last_accessed_at)`: one narrow row per memory that has been read;
  fillfactor 70 so that the next count is a HOT update of a 50-byte row.
* No foreign key: its check locks the referenced row (FOR KEY SHARE), and a row lock is written into the
  memory's tuple header, so every first count after a checkpoint would still write a full page of `memories`
  to the WAL. Instead statement triggers on `memories` delete the counts of the rows a DELETE removes (one
  statement per DELETE, through its transition table) or a TRUNCATE empties, and the flush only counts memories
  that exist.
* Existing counts move there, and the two columns leave `memories`.

Revision ID: 0014_memory_access
Revises: 0013_lifecycle_due
Create Date: 2026-12-08 09:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_memory_access"
down_revision: str | None = "0013_lifecycle_due"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE memory_access ("
        " memory_id uuid PRIMARY KEY,"
        " access_count integer NOT NULL DEFAULT 0,"
        " last_accessed_at timestamptz)"
        " WITH (fillfactor = 70)"
    )
    op.execute(
        "INSERT INTO memory_access (memory_id, access_count, last_accessed_at)"
        " SELECT id, access_count, last_accessed_at FROM memories"
        " WHERE access_count > 0 OR last_accessed_at IS NOT NULL"
    )
    op.execute("ALTER TABLE memories DROP COLUMN access_count, DROP COLUMN last_accessed_at")
    op.execute(
        "CREATE FUNCTION memories_forget_access() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " DELETE FROM memory_access a USING gone g WHERE a.memory_id = g.id; RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER memories_forget_access AFTER DELETE ON memories REFERENCING OLD TABLE AS gone"
        " FOR EACH STATEMENT EXECUTE FUNCTION memories_forget_access()"
    )
    op.execute(
        "CREATE FUNCTION memories_truncate_access() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " TRUNCATE memory_access; RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER memories_truncate_access AFTER TRUNCATE ON memories"
        " FOR EACH STATEMENT EXECUTE FUNCTION memories_truncate_access()"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE memories ADD COLUMN access_count integer NOT NULL DEFAULT 0,"
        " ADD COLUMN last_accessed_at timestamptz"
    )
    op.execute(
        "UPDATE memories m SET access_count = a.access_count, last_accessed_at = a.last_accessed_at"
        " FROM memory_access a WHERE a.memory_id = m.id"
    )
    op.execute("DROP TRIGGER IF EXISTS memories_truncate_access ON memories")
    op.execute("DROP FUNCTION IF EXISTS memories_truncate_access()")
    op.execute("DROP TRIGGER IF EXISTS memories_forget_access ON memories")
    op.execute("DROP FUNCTION IF EXISTS memories_forget_access()")
    op.execute("DROP TABLE IF EXISTS memory_access")
