"""The harness's access to the store: seed memories, read a namespace back, and recall like the API does.

Seeding writes rows through the repositories (with an audit record), never ad-hoc SQL in a command.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from evaluation.scoring import StoredMemory
from hindsight.config import Settings
from hindsight.db.engine import ReadSession, Session
from hindsight.db.models import MemoryRow
from hindsight.db.repositories import AuditRepository, MemoryRepository, ProvenanceRepository
from hindsight.textsearch import SEARCH_VOCAB, memory_search_text
from pipeline.base import Embedder
from schemas.memories import MemoryRead

SEED_ACTOR = "eval.seed"

# One-line switch: "hybrid" = hindsight.services.recall.recall (what the API's search serves);
# "vector" = hindsight.services.memory_reads.search_memories (plain cosine).
RETRIEVAL = "hybrid"


@dataclass
class Hit:
    memory: MemoryRead
    score: float
    turn_ids: frozenset[str]
    """Union of the memory's provenance turn ids."""


def seed_memory(
    session: Session,
    namespace: str,
    *,
    key: str,
    value: str,
    kind: str,
    source: str,
    confidence: float,
    at: datetime,
    embedding: list[float],
    embedding_model: str,
    pinned: bool = False,
    now: datetime,
    backend: str = "eval-seed",
) -> uuid.UUID:
    """Insert one memory as if it had existed since `at` (created and last verified then)."""
    row = MemoryRow(
        id=uuid.uuid4(),
        namespace=namespace,
        kind=kind,
        key=key,
        value=value,
        subject=key.split(".", 1)[0] if "." in key else "user",
        source=source,
        confidence=confidence,
        state="active",
        pinned=pinned,
        negated=False,
        has_conflict=False,
        embedding=embedding,
        search_text=memory_search_text(key, value),
        search_vocab=SEARCH_VOCAB,
        backend=backend,
        embedding_model=embedding_model,
        created_at=at,
        updated_at=at,
        last_verified_at=at,
        state_changed_at=at,
        access_count=0,
    )
    MemoryRepository(session).add(row)
    AuditRepository(session).add(
        memory_id=row.id,
        namespace=namespace,
        action="created",
        actor=SEED_ACTOR,
        to_state="active",
        detail={"value": value, "key": key, "kind": kind, "confidence": confidence, "source": source},
        at=now,
    )
    return row.id


def write_memories(
    session: Session,
    namespace: str,
    facts: Sequence[tuple[str, str, datetime | None]],
    *,
    embedder: Embedder,
    settings: Settings,
    now: datetime,
) -> list[uuid.UUID]:
    """Write (key, value, time) facts through the store's write path (reconcile + writer).

    Returns, for each fact, the id of the memory that carries it (a deduplicated fact points at the memory
    it refreshed).
    """
    from hindsight.services.memory_writer import MemoryWriter, lock_namespace, reconcile_in_namespace
    from schemas.pipeline import CandidateFact, EmbeddedFact, MemoryKind, Source

    vectors = embedder.embed([v for _, v, _ in facts])
    out: list[uuid.UUID] = []
    lock_namespace(session, namespace)
    for (key, value, at), vec in zip(facts, vectors, strict=True):
        fact = CandidateFact(
            kind=MemoryKind.fact, key=key, value=value, source=Source.manual, confidence=0.9, turn_ids=[]
        )
        ops, rows = reconcile_in_namespace(
            session,
            namespace,
            [EmbeddedFact(fact=fact, embedding=vec)],
            dedupe_threshold=settings.embedding.effective_dedupe_threshold,
        )
        writer = MemoryWriter(
            session=session,
            namespace=namespace,
            transcript_id=None,
            occurred_at=min(at or now, now),
            actor=SEED_ACTOR,
            backend="manual",
            embedding_model=embedder.name,
            now=now,
            rows=rows,
        )
        carried = None
        for op in ops:
            carried = writer.apply(op).id
        assert carried is not None
        out.append(carried)
        session.flush()
    return out


def namespace_memories(session: ReadSession, namespace: str) -> list[StoredMemory]:
    rows, _ = MemoryRepository(session).page(namespace, limit=10_000)
    return [_stored(r) for r in rows]


def _stored(r: MemoryRow | MemoryRead) -> StoredMemory:
    return StoredMemory(
        id=str(r.id),
        value=r.value,
        state=r.state,
        confidence=r.confidence,
        has_conflict=r.has_conflict,
        key=r.key,
    )


def as_stored(hit: Hit) -> StoredMemory:
    return _stored(hit.memory)


def retrieve(
    session: ReadSession,
    namespace: str,
    query: str,
    *,
    embedder: Embedder,
    settings: Settings,
    top_k: int,
    min_score: float | None = None,
    now: datetime | None = None,
) -> list[Hit]:
    """Memories for `query`, best first, as the API's search would return them, with provenance (`now`: when
    the question is asked)."""
    if RETRIEVAL == "hybrid":
        from hindsight.services.recall import recall

        result = recall(
            session,
            namespace,
            query,
            embedder=embedder,
            settings=settings.retrieval,
            top_k=top_k,
            min_score=min_score,
            record_access=False,
            now=now,
        )
        return [Hit(h.memory, h.score, frozenset(t for p in h.provenance for t in p.turn_ids)) for h in result.hits]
    from hindsight.services.memory_reads import search_memories

    found = search_memories(session, namespace, query, embedder=embedder, top_k=top_k)
    prov = provenance_turns(session, [h.memory.id for h in found.hits])
    return [Hit(h.memory, h.score, prov.get(h.memory.id, frozenset())) for h in found.hits]


def provenance_turns(session: ReadSession, memory_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, frozenset[str]]:
    repo = ProvenanceRepository(session)
    return {mid: frozenset(t for p in repo.for_memory(mid) for t in p.turn_ids) for mid in memory_ids}


@dataclass
class ConversationHit:
    """An episode summary or a round, as the harness ranks it: its text, when, the turns it credits, its score."""

    text: str
    occurred_at: datetime
    turn_ids: frozenset[str]
    score: float


def conversation_search(
    unit: Literal["episodes", "rounds"],
    session: ReadSession,
    namespace: str,
    query: str,
    vector: list[float],
    k: int,
    *,
    embedder: Embedder,
    settings: Settings,
    now: datetime | None = None,
) -> list[ConversationHit]:
    """Episode summaries (as /episodes/search returns them) or rounds, a user turn and the start of its reply (as
    /rounds/search returns them), that best match the query."""
    from hindsight.services.recall import recall_episodes, recall_rounds

    kw: dict[str, Any] = {"embedder": embedder, "settings": settings.retrieval, "top_k": k, "query_vector": vector}
    if unit == "episodes":
        episodes = recall_episodes(session, namespace, query, now=now, **kw).hits
        return [
            ConversationHit(h.episode.summary, h.episode.occurred_at, frozenset(h.episode.turn_ids), h.score)
            for h in episodes
        ]
    rounds = recall_rounds(session, namespace, query, now=now, **kw).hits
    return [ConversationHit(h.round.text, h.round.occurred_at, frozenset(h.round.turn_ids), h.score) for h in rounds]
