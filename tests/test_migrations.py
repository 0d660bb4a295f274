"""Migrations: upgrade to head, downgrade to base, upgrade again, on a real PostgreSQL with pgvector."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from hindsight.db import migrate

TABLES = {
    "transcripts",
    "episodes",
    "memories",
    "memory_provenance",
    "memory_audit",
    "memory_conflicts",
    "memory_access",
}


def _tables(url: str) -> set[str]:
    eng = sa.create_engine(url)
    with eng.connect() as conn:
        names = set(conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname='public'")).scalars())
    eng.dispose()
    return names


def _columns(eng: sa.Engine, table: str) -> set[str]:
    with eng.connect() as conn:
        q = sa.text("SELECT column_name FROM information_schema.columns WHERE table_name = :t")
        return set(conn.execute(q, {"t": table}).scalars())


def _insert_memory(conn: sa.Connection, key: str, value: str, embedding: str, search_text: str = "") -> None:
    """One active memory in namespace 'ns', with the columns every revision since the first has."""
    conn.execute(
        sa.text(
            "INSERT INTO memories (id, namespace, kind, key, value, subject, source, confidence, state, pinned, "
            "negated, has_conflict, embedding, search_text, backend, embedding_model, created_at, updated_at, "
            "last_verified_at, state_changed_at) VALUES (gen_random_uuid(), 'ns', 'fact', :k, :v, "
            "'user', 'user', 0.8, 'active', false, false, false, CAST(:e AS vector), :st, 'test', 'test', "
            "now(), now(), now(), now())"
        ),
        {"k": key, "v": value, "e": embedding, "st": search_text},
    )


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
        indexes: dict[str, str] = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='memories'")).all()
        )
        assert "USING hnsw" in indexes["ix_memories_embedding_hnsw"]
        assert "halfvec_cosine_ops" in indexes["ix_memories_embedding_hnsw"]
        gin = "USING gin (hindsight_ns_lexemes((namespace)::text, content_tsv))"
        assert gin in indexes["ix_memories_namespaced_tsv"]
        assert not {"ix_memories_content_tsv", "ix_memories_namespace_tsv"} & set(indexes)
        episode_indexes: dict[str, str] = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='episodes'")).all()
        )
        assert "USING hnsw" in episode_indexes["ix_episodes_embedding_hnsw"]
        dim = conn.execute(
            sa.text(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid='memories'::regclass AND attname='embedding'"
            )
        ).scalar_one()
        assert dim == "halfvec(8)"
    eng.dispose()


def test_episode_text_search_backfills_existing_episodes(services) -> None:
    url = services.create_database("migrations_episode_text")
    migrate.upgrade(url, "0004_episode_hnsw", embedding_dim=8)
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        tid = conn.execute(
            sa.text(
                "INSERT INTO transcripts (id, namespace, conversation_id, idempotency_key, event_type, turns, "
                "occurred_at, state, attempts, attempt_log, redactions, updated_at) VALUES (gen_random_uuid(), "
                "'ns', 'c', 'k', 'conversation_end', '[]', now(), 'done', 1, '[]', '[]', now()) RETURNING id"
            )
        ).scalar_one()
        conn.execute(
            sa.text(
                "INSERT INTO episodes (id, namespace, transcript_id, summary, entities, turn_ids, backend, "
                "occurred_at) VALUES (gen_random_uuid(), 'ns', :t, :summary, '[\"Kyoto\"]', '[]', 'test', now())"
            ),
            {"t": tid, "summary": "用户提到：我们把数据库升级到 PostgreSQL 16 了"},
        )
    migrate.upgrade(url, embedding_dim=8)
    with eng.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT count(*) FROM episodes WHERE content_tsv @@ plainto_tsquery('simple', '升级') "
                "AND content_tsv @@ plainto_tsquery('simple', 'kyoto')"
            )
        ).scalar_one()
        indexes: dict[str, str] = dict(
            conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename='episodes'")).all()
        )
    assert found == 1  # the summary segmented by jieba, and its entities
    assert "USING gin (hindsight_ns_lexemes((namespace)::text, content_tsv))" in indexes["ix_episodes_namespaced_tsv"]
    migrate.downgrade(url, "0004_episode_hnsw", embedding_dim=8)
    assert not _columns(eng, "episodes") & {"search_text", "content_tsv"}
    eng.dispose()


def test_memory_search_text_gains_key_topics_and_loses_them_on_downgrade(services) -> None:
    url = services.create_database("migrations_key_topics")
    migrate.upgrade(url, "0005_episode_text_search", embedding_dim=8)
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        _insert_memory(
            conn, "user.role", "用户在市一院 ICU 当护士", "[1,0,0,0,0,0,0,0]", "user role 用户 在 市 一院 icu 当 护士"
        )

    def matches(word: str) -> int:
        with eng.connect() as conn:
            return conn.execute(
                sa.text("SELECT count(*) FROM memories WHERE content_tsv @@ plainto_tsquery('simple', :w)"), {"w": word}
            ).scalar_one()

    assert matches("工作") == 0
    migrate.upgrade(url, embedding_dim=8)
    assert matches("工作") == 1  # the key's topic word, through the generated tsvector
    assert matches("护士") == 1  # the value is still indexed
    migrate.downgrade(url, "0005_episode_text_search", embedding_dim=8)
    assert matches("工作") == 0
    assert matches("护士") == 1
    eng.dispose()


def test_embeddings_become_halfvec_with_their_values_and_back(services) -> None:
    """0011 retypes the stored embeddings of memories (and episodes, rounds) in place: each value survives to half
    precision, the HNSW index is rebuilt on halfvec_cosine_ops and serves a nearest-neighbour query; downgrade
    restores vector."""
    url = services.create_database("migrations_halfvec")
    migrate.upgrade(url, "0010_rounds", embedding_dim=8)
    eng = sa.create_engine(url)
    values = {"a": "[1,0,0,0,0,0,0,0]", "b": "[0.6,0.8,0,0,0,0,0,0]", "c": "[0,0,0,0,0,0,0.28,0.96]"}
    with eng.begin() as conn:
        for key, vec in values.items():
            _insert_memory(conn, f"user.{key}", key, vec)

    def column_and_index() -> tuple[str, str]:
        with eng.connect() as conn:
            col = conn.execute(
                sa.text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid='memories'::regclass AND attname='embedding'"
                )
            ).scalar_one()
            idx = conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname='ix_memories_embedding_hnsw'")
            ).scalar_one()
        return col, idx

    assert column_and_index()[0] == "vector(8)"
    migrate.upgrade(url, embedding_dim=8)
    col, idx = column_and_index()
    assert col == "halfvec(8)"
    assert "halfvec_cosine_ops" in idx
    with eng.begin() as conn:
        conn.execute(sa.text("SET LOCAL enable_seqscan = off"))  # the rebuilt index answers
        nearest = conn.execute(
            sa.text("SELECT key FROM memories ORDER BY embedding <=> CAST('[0.5,0.9,0,0,0,0,0,0]' AS halfvec) LIMIT 1")
        ).scalar_one()
        stored: dict[str, str] = dict(conn.execute(sa.text("SELECT key, embedding::text FROM memories")).all())
    assert nearest == "user.b"
    for key, vec in values.items():
        got = [float(x) for x in stored[f"user.{key}"].strip("[]").split(",")]
        want = [float(x) for x in vec.strip("[]").split(",")]
        assert got == pytest.approx(want, abs=1e-3)
    migrate.downgrade(url, "0010_rounds", embedding_dim=8)
    assert column_and_index()[0] == "vector(8)"
    assert "vector_cosine_ops" in column_and_index()[1]
    eng.dispose()


def test_access_counts_move_to_their_own_table_and_back(services) -> None:
    """0014 moves each memory's access count and last access out of the memory row into `memory_access`
    (only rows that were read get one); downgrade puts them back; a TRUNCATE of `memories` empties it."""
    url = services.create_database("migrations_access")
    migrate.upgrade(url, "0013_lifecycle_due", embedding_dim=8)
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        _insert_memory(conn, "user.read", "read", "[1,0,0,0,0,0,0,0]")
        _insert_memory(conn, "user.unread", "unread", "[0,1,0,0,0,0,0,0]")
        conn.execute(
            sa.text(
                "UPDATE memories SET access_count = 7, last_accessed_at = '2026-11-01T10:00:00Z' "
                "WHERE key = 'user.read'"
            )
        )
    migrate.upgrade(url, embedding_dim=8)
    with eng.connect() as conn:
        moved = conn.execute(
            sa.text(
                "SELECT m.key, a.access_count, a.last_accessed_at::date::text FROM memory_access a "
                "JOIN memories m ON m.id = a.memory_id"
            )
        ).all()
    assert [tuple(r) for r in moved] == [("user.read", 7, "2026-11-01")]
    assert not _columns(eng, "memories") & {"access_count", "last_accessed_at"}
    migrate.downgrade(url, "0013_lifecycle_due", embedding_dim=8)
    with eng.connect() as conn:
        back: dict[str, int] = dict(conn.execute(sa.text("SELECT key, access_count FROM memories")).all())
    assert back == {"user.read": 7, "user.unread": 0}
    # Upgraded again, a TRUNCATE of the memories empties their counts too (the trigger stands in for a foreign key).
    migrate.upgrade(url, embedding_dim=8)
    with eng.begin() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM memory_access")).scalar_one() == 1
        conn.execute(sa.text("TRUNCATE memories CASCADE"))
        assert conn.execute(sa.text("SELECT count(*) FROM memory_access")).scalar_one() == 0
    eng.dispose()


def test_namespaced_lexemes_match_as_the_text_does_and_only_in_their_namespace(services) -> None:
    """0015 indexes each lexeme under its namespace. For every text and query, the namespaced lexemes match the
    namespaced query exactly when the text matches the query, and never another namespace's query; downgrade
    restores 0012's index."""
    url = services.create_database("migrations_ns_lexemes")
    migrate.upgrade(url, embedding_dim=8)
    texts = [
        "User moved to Lisbon; works on node.js and c++",
        "用户 对 花生 过敏",
        "it's the team's QX-48213 ticket",
        "back\\slash and a 'quoted' word",
        "x" * 2100 + " long",
        "",
    ]
    queries = [
        "to_tsquery('simple', 'lisbo:*')",
        "plainto_tsquery('simple', 'node.js')",
        "plainto_tsquery('simple', 'c++')",
        "plainto_tsquery('simple', '花生')",
        "plainto_tsquery('simple', 'qx-48213')",
        "to_tsquery('simple', 'team:*') || plainto_tsquery('simple', 'it''s')",
        "plainto_tsquery('simple', 'quoted') || plainto_tsquery('simple', 'back\\slash')",
        "plainto_tsquery('simple', 'long')",
        "plainto_tsquery('simple', 'absent')",
    ]
    eng = sa.create_engine(url)
    with eng.connect() as conn:
        for t in texts:
            for q in queries:
                plain, same, other = conn.execute(
                    sa.text(
                        f"SELECT to_tsvector('simple', :t) @@ ({q}),"
                        f" hindsight_ns_lexemes('tenant a', to_tsvector('simple', :t))"
                        f"   @@ hindsight_ns_query('tenant a', {q}),"
                        f" hindsight_ns_lexemes('tenant a', to_tsvector('simple', :t))"
                        f"   @@ hindsight_ns_query('tenant b', {q})"
                    ),
                    {"t": t},
                ).one()
                assert (same, other) == (plain, False), (t[:40], q)
        matched = conn.execute(
            sa.text("SELECT to_tsvector('simple', :t) @@ plainto_tsquery('simple', 'long')"), {"t": texts[4]}
        ).scalar_one()
        assert matched  # the 2,100-letter word is left out of the index alone; the rest of its text is there
    migrate.downgrade(url, "0014_memory_access", embedding_dim=8)
    with eng.connect() as conn:
        indexes = {r[0] for r in conn.execute(sa.text("SELECT indexname FROM pg_indexes WHERE tablename='rounds'"))}
        functions = conn.execute(sa.text("SELECT count(*) FROM pg_proc WHERE proname LIKE 'hindsight_ns_%'")).scalar()
    assert "ix_rounds_namespace_tsv" in indexes
    assert "ix_rounds_namespaced_tsv" not in indexes
    assert functions == 0
    eng.dispose()


def test_0011_updates_an_old_pgvector_or_says_what_to_install() -> None:
    """The decision of 0011 on the installed and offered pgvector versions. (The server here has only 0.8.6's
    install script, so an older extension cannot be created to run the update itself.)"""
    import importlib.util
    from pathlib import Path

    import migrations

    path = Path(migrations.__file__).parent / "versions" / "2026-12-06-0900_halfvec.py"
    spec = importlib.util.spec_from_file_location("halfvec_migration", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.pgvector_step("0.8.6", "0.8.6") is None
    assert module.pgvector_step("0.8.0", "0.7.4") is None  # installed is what counts
    assert module.pgvector_step("0.6.2", "0.8.1") == "ALTER EXTENSION vector UPDATE"
    with pytest.raises(RuntimeError, match=r"needs pgvector >= 0.8 \(installed 0.7.4, the server offers 0.7.4\)"):
        module.pgvector_step("0.7.4", "0.7.4")
    with pytest.raises(RuntimeError, match="installed None"):
        module.pgvector_step(None, None)


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
