"""Keyword weights from each namespace's own rows: per-namespace document frequencies kept by triggers.

Recall weighted a query term by its rarity from PostgreSQL's statistics of `content_tsv` (pg_stats), which
cover the whole table: when one namespace wrote a word often, every other namespace saw that word's weight,
and so its hits' keyword parts, change (security issue #10, finding 9). `namespace_term_counts` holds, per
table (`source`: memories or episodes), namespace and lexeme, how many of the namespace's rows contain the
lexeme; the empty lexeme (which no tsvector holds) counts the namespace's rows. Triggers keep it exact in
the writer's transaction, so recall reads a few index rows of its own namespace and nothing else:

* INSERT and DELETE: statement-level with transition tables, so a bulk load (COPY) or a namespace delete
  costs one aggregated upsert, not one per row;
* UPDATE: row-level, and only when the text or the namespace changes (`WHEN`), so access counts, state
  changes and every other update skip it;
* TRUNCATE: forgets the table's counts.

Counters are upserted in (namespace, lexeme) order, so two statements never take their row locks in
opposite orders; writers of one namespace already serialise on its advisory lock (services/memory_writer.py).
Existing rows are counted here. Plain SQL only: no application code.

Revision ID: 0007_namespace_term_counts
Revises: 0006_memory_key_topics
Create Date: 2026-12-02 09:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007_namespace_term_counts"
down_revision: str | None = "0006_memory_key_topics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("memories", "episodes")

# A row's lexemes plus '' (the row itself), the unit every trigger adds or removes.
_ROW_TERMS = "unnest(tsvector_to_array({tsv}) || ''::text)"

_FUNCTIONS = f"""
CREATE FUNCTION namespace_terms_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO namespace_term_counts AS t (source, namespace, lexeme, rows)
    SELECT TG_TABLE_NAME, n.namespace, l.lexeme, count(*)
    FROM new_rows n, {_ROW_TERMS.format(tsv="n.content_tsv")} AS l(lexeme)
    GROUP BY n.namespace, l.lexeme
    ORDER BY n.namespace, l.lexeme COLLATE "C"
    ON CONFLICT (source, namespace, lexeme) DO UPDATE SET rows = t.rows + excluded.rows;
    RETURN NULL;
END $$;

CREATE FUNCTION namespace_terms_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO namespace_term_counts AS t (source, namespace, lexeme, rows)
    SELECT TG_TABLE_NAME, o.namespace, l.lexeme, -count(*)
    FROM old_rows o, {_ROW_TERMS.format(tsv="o.content_tsv")} AS l(lexeme)
    GROUP BY o.namespace, l.lexeme
    ORDER BY o.namespace, l.lexeme COLLATE "C"
    ON CONFLICT (source, namespace, lexeme) DO UPDATE SET rows = t.rows + excluded.rows;
    DELETE FROM namespace_term_counts t
    USING (SELECT DISTINCT o.namespace, l.lexeme COLLATE "C" AS lexeme
           FROM old_rows o, {_ROW_TERMS.format(tsv="o.content_tsv")} AS l(lexeme)) d
    WHERE t.source = TG_TABLE_NAME AND t.namespace = d.namespace AND t.lexeme = d.lexeme AND t.rows <= 0;
    RETURN NULL;
END $$;

CREATE FUNCTION namespace_terms_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO namespace_term_counts AS t (source, namespace, lexeme, rows)
    SELECT TG_TABLE_NAME, d.namespace, d.lexeme, sum(d.n)
    FROM (
        SELECT OLD.namespace AS namespace, l.lexeme, -1 AS n
        FROM {_ROW_TERMS.format(tsv="OLD.content_tsv")} AS l(lexeme)
        UNION ALL
        SELECT NEW.namespace, l.lexeme, 1 FROM {_ROW_TERMS.format(tsv="NEW.content_tsv")} AS l(lexeme)
    ) d
    GROUP BY d.namespace, d.lexeme
    HAVING sum(d.n) <> 0
    ORDER BY d.namespace, d.lexeme COLLATE "C"
    ON CONFLICT (source, namespace, lexeme) DO UPDATE SET rows = t.rows + excluded.rows;
    DELETE FROM namespace_term_counts t
    WHERE t.source = TG_TABLE_NAME AND t.namespace = OLD.namespace AND t.rows <= 0
      AND t.lexeme = ANY((tsvector_to_array(OLD.content_tsv) || ''::text) COLLATE "C");
    RETURN NULL;
END $$;

CREATE FUNCTION namespace_terms_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM namespace_term_counts WHERE source = TG_TABLE_NAME;
    RETURN NULL;
END $$;
"""


def _triggers(table: str) -> str:
    return f"""
CREATE TRIGGER {table}_terms_insert AFTER INSERT ON {table}
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_insert();
CREATE TRIGGER {table}_terms_delete AFTER DELETE ON {table}
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_delete();
CREATE TRIGGER {table}_terms_update AFTER UPDATE OF search_text, namespace ON {table}
    FOR EACH ROW WHEN (OLD.content_tsv IS DISTINCT FROM NEW.content_tsv OR OLD.namespace IS DISTINCT FROM NEW.namespace)
    EXECUTE FUNCTION namespace_terms_update();
CREATE TRIGGER {table}_terms_truncate AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_truncate();
"""


def upgrade() -> None:
    # `lexeme` sorts bytewise (C) so that a prefix term (`live:*`) is one index range scan.
    op.execute(
        """
        CREATE TABLE namespace_term_counts (
            source varchar(16) NOT NULL,
            namespace varchar(128) NOT NULL,
            lexeme text COLLATE "C" NOT NULL,
            rows integer NOT NULL,
            CONSTRAINT pk_namespace_term_counts PRIMARY KEY (source, namespace, lexeme)
        )"""
    )
    op.execute(_FUNCTIONS)
    for table in _TABLES:
        # Counted under a lock that blocks writers, so no row is counted twice or missed.
        op.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")
        op.execute(
            f"""
            INSERT INTO namespace_term_counts (source, namespace, lexeme, rows)
            SELECT '{table}', m.namespace, l.lexeme, count(*)
            FROM {table} m, {_ROW_TERMS.format(tsv="m.content_tsv")} AS l(lexeme)
            GROUP BY m.namespace, l.lexeme"""
        )
        op.execute(_triggers(table))


def downgrade() -> None:
    for table in _TABLES:
        for event in ("insert", "delete", "update", "truncate"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_terms_{event} ON {table}")
    for event in ("insert", "delete", "update", "truncate"):
        op.execute(f"DROP FUNCTION IF EXISTS namespace_terms_{event}()")
    op.execute("DROP TABLE IF EXISTS namespace_term_counts")
