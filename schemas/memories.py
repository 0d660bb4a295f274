"""Read models for memories, their provenance and history, and search hits."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class MemoryRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    namespace: str
    kind: str
    key: str
    value: str
    subject: str
    source: str
    confidence: float
    state: str
    pinned: bool
    negated: bool
    ttl_days: int | None
    has_conflict: bool
    backend: str
    embedding_model: str
    created_at: datetime
    updated_at: datetime
    last_verified_at: datetime
    state_changed_at: datetime
    last_accessed_at: datetime | None
    access_count: int


class ProvenanceRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    transcript_id: uuid.UUID | None
    turn_ids: list[str]
    action: str
    created_at: datetime


class AuditRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    action: str
    from_state: str | None
    to_state: str | None
    detail: dict[str, Any]
    transcript_id: uuid.UUID | None
    actor: str
    created_at: datetime


class ConflictRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    old_memory_id: uuid.UUID
    new_memory_id: uuid.UUID
    reason: str
    resolution: str
    created_at: datetime


class MemoryDetail(MemoryRead):
    provenance: list[ProvenanceRead]
    history: list[AuditRead]
    conflicts: list[ConflictRead]


class MemoryPage(BaseModel):
    items: list[MemoryRead]
    total: int
    limit: int
    offset: int


class SearchHit(BaseModel):
    memory: MemoryRead
    score: float
    """Cosine similarity of the query to the memory (vector-only search)."""


class SearchResult(BaseModel):
    query: str
    hits: list[SearchHit]


class EpisodeRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    transcript_id: uuid.UUID
    summary: str
    entities: list[str]
    turn_ids: list[str]
    backend: str
    occurred_at: datetime
    created_at: datetime
