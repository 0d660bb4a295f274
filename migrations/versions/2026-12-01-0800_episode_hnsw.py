"""An HNSW index on episode embeddings, for episode search in namespaces with many conversations.

Without it, episode search is an exact scan of the namespace's episodes: measured ~11 ms at 1,000 and ~47 ms
at 10,000 episodes (512-dim, bench/recall.py). Recall's namespace-aware plan (exact scan for small
namespaces, HNSW over-fetch or iterative scans for big ones) now serves episodes too.

Revision ID: 0004_episode_hnsw
Revises: 0003_forget_erase
Create Date: 2026-12-01 08:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004_episode_hnsw"
down_revision: str | None = "0003_forget_erase"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_episodes_embedding_hnsw",
        "episodes",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_episodes_embedding_hnsw", table_name="episodes")
