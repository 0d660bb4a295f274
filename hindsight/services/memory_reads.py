"""Reading memories: list, get with provenance and history, vector search. Used by the API and the CLI."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from hindsight.db.engine import ReadSession
from hindsight.db.repositories import (
    AuditRepository,
    ConflictRepository,
    EpisodeRepository,
    MemoryRepository,
    ProvenanceRepository,
    RoundRepository,
)
from hindsight.errors import InvalidInput, NotFound
from pipeline.base import Embedder
from schemas.memories import (
    AuditRead,
    ConflictRead,
    EpisodeRead,
    MemoryDetail,
    MemoryPage,
    MemoryRead,
    ProvenanceRead,
    RoundRead,
    SearchHit,
    SearchResult,
)
from schemas.pipeline import MemoryState

DEFAULT_SEARCH_STATES = ("active", "stale")
MAX_QUERY_CHARS = 2000


def list_memories(
    session: ReadSession,
    namespace: str,
    *,
    states: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    limit: int = 50,
    offset: int = 0,
) -> MemoryPage:
    rows, total = MemoryRepository(session).page(namespace, states=states, kinds=kinds, limit=limit, offset=offset)
    return MemoryPage(items=[MemoryRead.model_validate(r) for r in rows], total=total, limit=limit, offset=offset)


def get_memory(session: ReadSession, namespace: str, memory_id: uuid.UUID) -> MemoryDetail:
    row = MemoryRepository(session).get(namespace, memory_id)
    if row is None:
        raise NotFound(f"memory {memory_id} not found")
    provenance = ProvenanceRepository(session).for_memory(row.id)
    sources: dict[uuid.UUID, set[str]] = {}
    for p in provenance:
        if p.transcript_id is not None:
            sources.setdefault(p.transcript_id, set()).update(p.turn_ids)
    return MemoryDetail(
        **MemoryRead.model_validate(row).model_dump(),
        provenance=[ProvenanceRead.model_validate(p) for p in provenance],
        rounds=[RoundRead.model_validate(r) for r in RoundRepository(session).showing(namespace, sources)],
        history=[AuditRead.model_validate(a) for a in AuditRepository(session).history(row.id)],
        conflicts=[ConflictRead.model_validate(c) for c in ConflictRepository(session).for_memory(row.id)],
    )


def search_memories(
    session: ReadSession,
    namespace: str,
    query: str,
    *,
    embedder: Embedder,
    top_k: int,
    states: Sequence[str] = DEFAULT_SEARCH_STATES,
) -> SearchResult:
    """Plain vector similarity within one namespace (the evaluation's `vector` baseline; the product's hybrid
    recall is services.recall). Reads only: no access is counted."""
    query = query.strip()
    if not query:
        raise InvalidInput("query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    for s in states:
        if s not in MemoryState.__members__:
            raise InvalidInput(f"unknown state {s!r}")
    vector = embedder.embed([query])[0]
    repo = MemoryRepository(session)
    found = repo.vector_search(namespace, vector, states=states, limit=top_k)
    return SearchResult(
        query=query,
        hits=[SearchHit(memory=MemoryRead.model_validate(r), score=round(s, 4)) for r, s in found],
    )


def count_rounds(session: ReadSession, namespace: str) -> int:
    """How many rounds (user turns kept as retrievable units) the namespace holds."""
    return RoundRepository(session).count(namespace)


def list_episodes(session: ReadSession, namespace: str, *, limit: int = 50, offset: int = 0) -> list[EpisodeRead]:
    return [EpisodeRead.model_validate(e) for e in EpisodeRepository(session).page(namespace, limit, offset)]
