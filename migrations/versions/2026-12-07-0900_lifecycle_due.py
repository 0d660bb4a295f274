"""A stored due time per memory, so that the lifecycle reads only the rows that are due.

The lifecycle's windows (days before an unconfirmed active memory turns stale, per slot and per kind; days in
`stale` before `archived`) come from the settings and the slot registry. Until now its query computed each row's
window in a CASE (`last_verified_at < now - make_interval(days => CASE kind/key …)`), which no index can serve:
every batch scanned every active row (BENCHMARKS.md "Scaling out": 0.46 s a batch at 1M memories).

* `lifecycle_windows` holds the windows in use: scope `key` (a key attribute: the key ends in "." and the name),
  `kind`, or `default` (name ''); `stale_days` / `archive_days`, NULL where that scope does not say. The
  lifecycle job writes it from the settings and the registry before each run; a change recomputes the due times
  it moves (`hindsight.services.lifecycle`).
* `memory_due_at(kind, key, state, pinned, last_verified_at, state_changed_at)`: when the row's next step is
  due: active → last verified + its stale window (key, then kind, then default); stale → state changed + its
  archive window (kind, then default); NULL when pinned, archived, forgotten, or no window is known.
* `lifecycle_due (memory_id, state, due_at)`, indexed on (state, due_at): one row per memory that has a next
  step. A trigger on `memories` keeps it whenever a memory is inserted or one of those columns is written, so
  every write path keeps it true, bulk UPDATEs and COPY included.
* The due time lives beside the memory, not in it, and `state` leaves `memories`' B-tree
  (`ix_memories_namespace_state_kind` becomes `ix_memories_namespace_kind`), with `fillfactor` 80: a move
  changes no indexed column of `memories`, so PostgreSQL updates the row in place (a HOT update) instead of
  adding an entry to every index, the HNSW graph included. Measured in BENCHMARKS.md ("Scaling out").
* `ix_memories_ttl_due` finds the rare rows with a ttl.

The windows are seeded with the defaults of this revision's day, and existing rows get their due time with
them; the first lifecycle run replaces them with the deployment's settings. No application code is imported.

Revision ID: 0013_lifecycle_due
Revises: 0012_namespace_gin
Create Date: 2026-12-07 09:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013_lifecycle_due"
down_revision: str | None = "0012_namespace_gin"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEED_KIND_STALE = {
    "preference": 90,
    "fact": 180,
    "profile": 365,
    "project": 21,
    "decision": 60,
    "habit": 90,
    "relationship": 365,
    "observation": 14,
}
SEED_KEY_STALE = {
    "hometown": 730,
    "origin": 730,
    "birthplace": 730,
    "home_town": 730,
    "deadline": 14,
    "due": 14,
    "launch": 14,
    "due_date": 14,
}
SEED_DEFAULT = (90, 90)

DUE_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_due_at(
    p_kind text, p_key text, p_state text, p_pinned boolean, p_verified timestamptz, p_changed timestamptz
) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_pinned THEN NULL
        WHEN p_state = 'active' THEN p_verified + make_interval(days => coalesce(
            (SELECT w.stale_days FROM lifecycle_windows w
              WHERE w.scope = 'key' AND w.stale_days IS NOT NULL AND right(p_key, length(w.name) + 1) = '.' || w.name
              ORDER BY length(w.name) DESC, w.name LIMIT 1),
            (SELECT w.stale_days FROM lifecycle_windows w WHERE w.scope = 'kind' AND w.name = p_kind),
            (SELECT w.stale_days FROM lifecycle_windows w WHERE w.scope = 'default')))
        WHEN p_state = 'stale' THEN p_changed + make_interval(days => coalesce(
            (SELECT w.archive_days FROM lifecycle_windows w WHERE w.scope = 'kind' AND w.name = p_kind),
            (SELECT w.archive_days FROM lifecycle_windows w WHERE w.scope = 'default')))
    END
$$
"""

TRIGGER_FUNCTION = """
CREATE OR REPLACE FUNCTION memories_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := memory_due_at(
        NEW.kind, NEW.key, NEW.state, NEW.pinned, NEW.last_verified_at, NEW.state_changed_at
    );
BEGIN
    IF due IS NULL THEN
        DELETE FROM lifecycle_due WHERE memory_id = NEW.id;
    ELSE
        INSERT INTO lifecycle_due (memory_id, state, due_at) VALUES (NEW.id, NEW.state, due)
        ON CONFLICT (memory_id) DO UPDATE SET state = EXCLUDED.state, due_at = EXCLUDED.due_at;
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.execute(
        "CREATE TABLE lifecycle_windows ("
        " scope varchar(8) NOT NULL CHECK (scope IN ('key', 'kind', 'default')),"
        " name varchar(128) NOT NULL,"
        " stale_days integer CHECK (stale_days >= 0),"
        " archive_days integer CHECK (archive_days >= 0),"
        " PRIMARY KEY (scope, name))"
    )
    rows = [f"('default', '', {SEED_DEFAULT[0]}, {SEED_DEFAULT[1]})"]
    rows += [f"('kind', '{k}', {d}, NULL)" for k, d in SEED_KIND_STALE.items()]
    rows += [f"('key', '{k}', {d}, NULL)" for k, d in SEED_KEY_STALE.items()]
    op.execute("INSERT INTO lifecycle_windows (scope, name, stale_days, archive_days) VALUES " + ", ".join(rows))
    op.execute(
        "CREATE TABLE lifecycle_due ("
        " memory_id uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,"
        " state varchar(16) NOT NULL,"
        " due_at timestamptz NOT NULL)"
    )
    op.execute("CREATE INDEX ix_lifecycle_due_state_due ON lifecycle_due (state, due_at)")
    op.execute(DUE_FUNCTION)
    op.execute(TRIGGER_FUNCTION)
    op.execute(
        "CREATE TRIGGER memories_schedule AFTER INSERT OR UPDATE OF kind, key, state, pinned, last_verified_at,"
        " state_changed_at ON memories FOR EACH ROW EXECUTE FUNCTION memories_schedule()"
    )
    op.execute(
        "INSERT INTO lifecycle_due (memory_id, state, due_at)"
        " SELECT id, state, memory_due_at(kind, key, state, pinned, last_verified_at, state_changed_at)"
        " FROM memories WHERE state IN ('active', 'stale')"
        " AND memory_due_at(kind, key, state, pinned, last_verified_at, state_changed_at) IS NOT NULL"
    )
    op.execute("CREATE INDEX ix_memories_namespace_kind ON memories (namespace, kind)")
    op.execute("DROP INDEX ix_memories_namespace_state_kind")
    op.execute("CREATE INDEX ix_memories_ttl_due ON memories (last_verified_at) WHERE ttl_days IS NOT NULL")
    op.execute("ALTER TABLE memories SET (fillfactor = 80)")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (fillfactor)")
    op.execute("DROP INDEX IF EXISTS ix_memories_ttl_due")
    op.execute("CREATE INDEX ix_memories_namespace_state_kind ON memories (namespace, state, kind)")
    op.execute("DROP INDEX IF EXISTS ix_memories_namespace_kind")
    op.execute("DROP TRIGGER IF EXISTS memories_schedule ON memories")
    op.execute("DROP FUNCTION IF EXISTS memories_schedule()")
    op.execute("DROP FUNCTION IF EXISTS memory_due_at(text, text, text, boolean, timestamptz, timestamptz)")
    op.execute("DROP TABLE IF EXISTS lifecycle_due")
    op.execute("DROP TABLE IF EXISTS lifecycle_windows")
