"""Migrations: upgrade to head, downgrade to base, upgrade again, on a real PostgreSQL with pgvector."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from hindsight.db import migrate

TABLES = {"transcripts", "episodes", "memories", "memory_provenance", "memory_audit", "memory_conflicts"}


def _tables(url: str) -> set[str]:
    eng = sa.create_engine(url)
    with eng.connect() as conn:
        names = set(conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname='public'")).scalars())
    eng.dispose()
    return names


def test_upgrade_downgrade_upgrade(services) -> None:
    url = services.create_database("migrations_roundtrip")
    migrate.upgrade(url, embedding_dim=8)
    assert _tables(url) >= TABLES
    migrate.downgrade(url, "base")
    assert not (TABLES & _tables(url))
    migrate.upgrade(url, embedding_dim=8)
    assert _tables(url) >= TABLES

    eng = sa.create_engine(url)
    with eng.connect() as conn:
        indexes = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='memories'")).all()
        )
        assert "USING hnsw" in indexes["ix_memories_embedding_hnsw"]
        assert "vector_cosine_ops" in indexes["ix_memories_embedding_hnsw"]
        assert "USING gin" in indexes["ix_memories_content_tsv"]
        episode_indexes = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='episodes'")).all()
        )
        assert "USING hnsw" in episode_indexes["ix_episodes_embedding_hnsw"]
        dim = conn.execute(
            sa.text(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid='memories'::regclass AND attname='embedding'"
            )
        ).scalar_one()
        assert dim == "vector(8)"
    eng.dispose()


def test_audit_history_is_append_only(engine) -> None:
    import uuid

    mid = uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO memory_audit (memory_id, namespace, action, actor) VALUES (:m, 'ns', 'created', 't')"),
            {"m": mid},
        )
    for stmt in (
        "UPDATE memory_audit SET action='x' WHERE memory_id=:m",
        "DELETE FROM memory_audit WHERE memory_id=:m",
    ):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(sa.text(stmt), {"m": mid})
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_audit WHERE memory_id=:m"), {"m": mid}).scalar() == 1
