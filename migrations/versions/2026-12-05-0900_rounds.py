"""Rounds: each user turn of a distilled transcript, with the start of its reply, as a retrievable unit.

Searched like episodes (HNSW on the embedding, full text with per-namespace term counts kept by the triggers
of migration 0007), keyed in full text by both turns and by the values of the facts distilled from them
(pipeline/rounds.py). The vector dimension is read from `memories.embedding`, so this revision imports no
application code. Transcripts distilled before it have no rounds: `hindsight backfill-rounds` builds them.

Revision ID: 0010_rounds
Revises: 0009_memory_also_slots
Create Date: 2026-12-05 09:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision: str = "0010_rounds"
down_revision: str | None = "0009_memory_also_slots"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _dim() -> int:
    mod = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
            )
        )
        .scalar_one()
    )
    return int(mod)


def upgrade() -> None:
    op.create_table(
        "rounds",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column(
            "transcript_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("transcripts.id", ondelete="CASCADE", name="fk_rounds_transcript_id_transcripts"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("turn_ids", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", Vector(_dim()), nullable=False),
        sa.Column("search_text", sa.Text, nullable=False, server_default=""),
        sa.Column("content_tsv", pg.TSVECTOR, sa.Computed("to_tsvector('simple', search_text)", persisted=True)),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_rounds"),
        sa.UniqueConstraint("transcript_id", "seq", name="uq_rounds_transcript_id"),
    )
    # Namespace first, then time: a query that names a time (pipeline.timeref.time_window) scans its window only.
    op.create_index("ix_rounds_namespace_occurred_at", "rounds", ["namespace", "occurred_at"])
    op.create_index("ix_rounds_transcript_id", "rounds", ["transcript_id"])
    op.create_index("ix_rounds_content_tsv", "rounds", ["content_tsv"], postgresql_using="gin")
    op.create_index(
        "ix_rounds_embedding_hnsw",
        "rounds",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    # Per-namespace term counts, by the functions of 0007 (their `source` is the table's name).
    op.execute(
        """
        CREATE TRIGGER rounds_terms_insert AFTER INSERT ON rounds
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_insert();
        CREATE TRIGGER rounds_terms_delete AFTER DELETE ON rounds
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_delete();
        CREATE TRIGGER rounds_terms_update AFTER UPDATE OF search_text, namespace ON rounds
            FOR EACH ROW WHEN (OLD.content_tsv IS DISTINCT FROM NEW.content_tsv
                               OR OLD.namespace IS DISTINCT FROM NEW.namespace)
            EXECUTE FUNCTION namespace_terms_update();
        CREATE TRIGGER rounds_terms_truncate AFTER TRUNCATE ON rounds
            FOR EACH STATEMENT EXECUTE FUNCTION namespace_terms_truncate();
        """
    )


def downgrade() -> None:
    op.drop_table("rounds")  # its triggers go with it
    op.execute("DELETE FROM namespace_term_counts WHERE source = 'rounds'")
