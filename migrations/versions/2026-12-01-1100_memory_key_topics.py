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

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_memory_key_topics"
down_revision: str | None = "0005_episode_text_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def _recompute(text_of: Callable[[str, str], str]) -> None:
    conn = op.get_bind()
    last = None
    while True:  # keyset batches: a big table is rewritten without holding every memory in memory
        rows = conn.execute(
            sa.text(
                "SELECT id, key, value FROM memories WHERE (CAST(:last AS uuid) IS NULL OR id > :last) "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": _BATCH},
        ).all()
        if not rows:
            break
        conn.execute(
            sa.text("UPDATE memories SET search_text = :t WHERE id = :id"),
            [{"id": r.id, "t": text_of(r.key, r.value)} for r in rows],
        )
        last = rows[-1].id


def upgrade() -> None:
    from hindsight.textsearch import memory_search_text

    _recompute(memory_search_text)


def downgrade() -> None:
    from hindsight.textsearch import search_text

    _recompute(lambda key, value: search_text(f"{key.replace('.', ' ').replace('_', ' ')} {value}"))
