"""Full-text search over episode summaries, so episode search is hybrid like memory recall.

Episode search was by meaning alone: a question that shares a rare word with one conversation ("数据库升级了吗",
"When did Caroline go to the LGBTQ conference?") could rank another conversation of the same topic first.
`search_text` is the summary segmented as memories are (jieba for Chinese, hindsight.textsearch), and
`content_tsv` its tsvector with a GIN index. Existing episodes are backfilled here.

Revision ID: 0005_episode_text_search
Revises: 0004_episode_hnsw
Create Date: 2026-12-01 10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_episode_text_search"
down_revision: str | None = "0004_episode_hnsw"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def upgrade() -> None:
    from hindsight.textsearch import episode_search_text

    op.add_column("episodes", sa.Column("search_text", sa.Text, nullable=False, server_default=""))
    op.execute(
        "ALTER TABLE episodes ADD COLUMN content_tsv tsvector "
        "GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED"
    )
    conn = op.get_bind()
    last = None
    while True:  # keyset batches: a big table is backfilled without holding every summary in memory
        rows = conn.execute(
            sa.text(
                "SELECT id, summary, entities FROM episodes WHERE (CAST(:last AS uuid) IS NULL OR id > :last) "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": _BATCH},
        ).all()
        if not rows:
            break
        conn.execute(
            sa.text("UPDATE episodes SET search_text = :t WHERE id = :id"),
            [{"id": r.id, "t": episode_search_text(r.summary, r.entities or [])} for r in rows],
        )
        last = rows[-1].id
    op.create_index("ix_episodes_content_tsv", "episodes", ["content_tsv"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_index("ix_episodes_content_tsv", table_name="episodes")
    op.drop_column("episodes", "content_tsv")
    op.drop_column("episodes", "search_text")
