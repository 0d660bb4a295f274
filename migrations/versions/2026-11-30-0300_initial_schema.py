"""Initial schema: pgvector, transcripts inbox, episodes, memories, provenance, audit, conflicts.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30 03:00
"""

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _dim() -> int:
    # The vector dimension is the configured embedding model's, fixed when this revision first runs.
    config = op.get_context().config
    dim = config.attributes.get("embedding_dim") if config else None
    if dim is None:
        from hindsight.config import get_settings

        dim = get_settings().embedding.vector_dim
    return int(dim)


def _ts(name: str, *, nullable: bool = False, default: bool = False) -> sa.Column[datetime]:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.func.now() if default else None,
    )


def upgrade() -> None:
    dim = _dim()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "transcripts",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=False),
        sa.Column("event_type", sa.String(32), nullable=False),
        sa.Column("turns", pg.JSONB, nullable=False),
        _ts("occurred_at"),
        _ts("received_at", default=True),
        sa.Column("state", sa.String(16), nullable=False, server_default="accepted"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("attempt_log", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("last_error", sa.Text),
        _ts("enqueued_at", nullable=True),
        _ts("processed_at", nullable=True),
        _ts("updated_at", default=True),
        sa.Column("redactions", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.CheckConstraint("state IN ('accepted', 'processing', 'done', 'dead')", name="state_valid"),
        sa.UniqueConstraint("namespace", "idempotency_key", name="uq_transcripts_namespace_idempotency_key"),
    )
    op.create_index("ix_transcripts_namespace", "transcripts", ["namespace"])
    # The sweeper looks for unfinished work by age; keep that scan off the done rows.
    op.create_index(
        "ix_transcripts_pending",
        "transcripts",
        ["updated_at"],
        postgresql_where=sa.text("state IN ('accepted', 'processing')"),
    )

    op.create_table(
        "episodes",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column(
            "transcript_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("transcripts.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("entities", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("turn_ids", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("embedding", Vector(dim)),
        sa.Column("backend", sa.String(128), nullable=False),
        _ts("occurred_at"),
        _ts("created_at", default=True),
    )
    op.create_index("ix_episodes_namespace", "episodes", ["namespace"])

    op.create_table(
        "memories",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("subject", sa.String(128), nullable=False, server_default="user"),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="active"),
        sa.Column("pinned", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("negated", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("ttl_days", sa.Integer),
        sa.Column("has_conflict", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.Column("search_text", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "content_tsv",
            pg.TSVECTOR,
            sa.Computed("to_tsvector('simple', search_text)", persisted=True),
        ),
        sa.Column("backend", sa.String(128), nullable=False),
        sa.Column("embedding_model", sa.String(256), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("last_verified_at"),
        _ts("state_changed_at"),
        _ts("last_accessed_at", nullable=True),
        sa.Column("access_count", sa.Integer, nullable=False, server_default="0"),
        sa.CheckConstraint("state IN ('active', 'stale', 'archived', 'quarantined')", name="state_valid"),
        sa.CheckConstraint("confidence >= 0 AND confidence <= 1", name="confidence_range"),
        sa.CheckConstraint("ttl_days IS NULL OR ttl_days > 0", name="ttl_positive"),
    )
    op.create_index("ix_memories_namespace_state_kind", "memories", ["namespace", "state", "kind"])
    op.create_index("ix_memories_namespace_key", "memories", ["namespace", "key"])
    op.create_index("ix_memories_content_tsv", "memories", ["content_tsv"], postgresql_using="gin")
    op.create_index(
        "ix_memories_embedding_hnsw",
        "memories",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )

    op.create_table(
        "memory_provenance",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column(
            "memory_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("memories.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "transcript_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("transcripts.id", ondelete="SET NULL"),
        ),
        sa.Column("turn_ids", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("action", sa.String(16), nullable=False),
        _ts("created_at", default=True),
    )
    op.create_index("ix_memory_provenance_memory_id", "memory_provenance", ["memory_id"])
    op.create_index("ix_memory_provenance_transcript_id", "memory_provenance", ["transcript_id"])

    op.create_table(
        "memory_audit",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("from_state", sa.String(16)),
        sa.Column("to_state", sa.String(16)),
        sa.Column("detail", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("transcript_id", pg.UUID(as_uuid=True)),
        sa.Column("actor", sa.String(64), nullable=False),
        _ts("created_at", default=True),
    )
    op.create_index("ix_memory_audit_memory_id", "memory_audit", ["memory_id"])
    # Append-only: rows can only be rewritten inside a transaction that explicitly opts in
    # (SET LOCAL hindsight.audit_rewrite = 'on'), which only the privacy erase does.
    op.execute(
        """
        CREATE FUNCTION hindsight_audit_append_only() RETURNS trigger AS $$
        BEGIN
            IF coalesce(current_setting('hindsight.audit_rewrite', true), '') = 'on' THEN
                RETURN COALESCE(NEW, OLD);
            END IF;
            RAISE EXCEPTION 'memory_audit is append-only (% refused)', TG_OP;
        END;
        $$ LANGUAGE plpgsql
        """
    )
    op.execute(
        """
        CREATE TRIGGER memory_audit_append_only
        BEFORE UPDATE OR DELETE ON memory_audit
        FOR EACH ROW EXECUTE FUNCTION hindsight_audit_append_only()
        """
    )

    op.create_table(
        "memory_conflicts",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column(
            "old_memory_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("memories.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "new_memory_id",
            pg.UUID(as_uuid=True),
            sa.ForeignKey("memories.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("resolution", sa.String(16), nullable=False, server_default="open"),
        sa.Column("transcript_id", pg.UUID(as_uuid=True)),
        _ts("created_at", default=True),
    )
    op.create_index("ix_memory_conflicts_namespace", "memory_conflicts", ["namespace"])


def downgrade() -> None:
    op.drop_table("memory_conflicts")
    op.execute("DROP TRIGGER IF EXISTS memory_audit_append_only ON memory_audit")
    op.execute("DROP FUNCTION IF EXISTS hindsight_audit_append_only()")
    op.drop_table("memory_audit")
    op.drop_table("memory_provenance")
    op.drop_table("memories")
    op.drop_table("episodes")
    op.drop_table("transcripts")
    # The extension is left in place: other schemas in the database may use it.
