"""Memory full text indexes its key's topic words ("user.role" -> job, occupation, 工作, ...).

"What does the user do for a living?" and "用户是做什么工作的？" share no word with "User is a freelance
translator" or its key: a memory's `search_text` now adds the words people ask about its key's topic with
(hindsight.textsearch.memory_search_text). Existing memories are recomputed here, in keyset batches; the
downgrade recomputes them without the topic words. `content_tsv` is generated from `search_text`, so
PostgreSQL updates it and its GIN index with each row.

Revision ID: 0006_memory_key_topics
Revises: 0005_episode_text_search
Create Date: 2026-12-01 11:00
"""

from collections.abc import Sequence
from typing import Any

from alembic import op

revision: str = "0006_memory_key_topics"
down_revision: str | None = "0005_episode_text_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    from hindsight.textsearch import memory_search_text
    from migrations.batches import rewrite_column

    rewrite_column(op.get_bind(), "memories", "key, value", "search_text", lambda r: memory_search_text(r.key, r.value))


def downgrade() -> None:
    from hindsight.textsearch import search_text
    from migrations.batches import rewrite_column

    def plain(r: Any) -> str:  # the search text before topic words (r: a row of rewrite_column's query)
        return search_text(f"{r.key.replace('.', ' ').replace('_', ' ')} {r.value}")

    rewrite_column(op.get_bind(), "memories", "key, value", "search_text", plain)
