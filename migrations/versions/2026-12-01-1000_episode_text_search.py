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


def upgrade() -> None:
    from hindsight.textsearch import episode_search_text
    from migrations.batches import rewrite_column

    op.add_column("episodes", sa.Column("search_text", sa.Text, nullable=False, server_default=""))
    op.execute(
        "ALTER TABLE episodes ADD COLUMN content_tsv tsvector "
        "GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED"
    )
    rewrite_column(
        op.get_bind(),
        "episodes",
        "summary, entities",
        "search_text",
        lambda r: episode_search_text(r.summary, r.entities or []),
    )
    op.create_index("ix_episodes_content_tsv", "episodes", ["content_tsv"], postgresql_using="gin")


def downgrade() -> None:
    op.drop_index("ix_episodes_content_tsv", table_name="episodes")
    op.drop_column("episodes", "content_tsv")
    op.drop_column("episodes", "search_text")
