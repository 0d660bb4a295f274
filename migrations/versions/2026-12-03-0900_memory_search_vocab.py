"""Each memory records the slot vocabulary its full-text search words were built with.

`memories.search_text` holds a memory's key words, its slot's topic words (pipeline/slots.py) and its value.
When the registry's words change, rows written before keep the old words until the reindex job
(hindsight/services/reindex.py, run by beat and by `hindsight reindex`) rebuilds them; `search_vocab`
says which rows those are. NULL means "built before versions were recorded": the job rebuilds those too.
The partial index finds them without reading the table. Plain DDL only: no application code, so this
migration means the same thing whatever the vocabulary is when it runs.

Revision ID: 0008_memory_search_vocab
Revises: 0007_namespace_term_counts
Create Date: 2026-12-03 09:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_memory_search_vocab"
down_revision: str | None = "0007_namespace_term_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("search_vocab", sa.String(32), nullable=True))
    op.create_index("ix_memories_search_vocab", "memories", ["search_vocab", "id"])


def downgrade() -> None:
    op.drop_index("ix_memories_search_vocab", table_name="memories")
    op.drop_column("memories", "search_vocab")
