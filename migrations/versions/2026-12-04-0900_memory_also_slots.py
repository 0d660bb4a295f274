"""Each memory records the other registry slots its value fills ("User has two kids and a dog": pet, and family).

The offline extractor's classifier names a runner-up slot when it finds it likely too; full-text search indexes
that slot's topic words beside the key's (so "does the user have children" finds the pet memory above), the
reindex job rebuilds them with the rest of the search text, and reconcile compares a change with memories filed
under either slot. Plain DDL: an empty list for every existing row (their search text already is what it was).

Revision ID: 0009_memory_also_slots
Revises: 0008_memory_search_vocab
Create Date: 2026-12-04 09:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0009_memory_also_slots"
down_revision: str | None = "0008_memory_search_vocab"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "memories",
        sa.Column("also_slots", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("memories", "also_slots")
