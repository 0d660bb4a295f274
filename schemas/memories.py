"""Read models for memories, their provenance and history, and search hits."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.inputs import InputModel
from schemas.pipeline import MemoryKind, Source


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
    also_slots: list[str] = []
    """Other registry slots the value fills besides its key's (the offline extractor's runner-up)."""
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


class RoundRead(BaseModel):
    """One user turn of an earlier conversation with the start of the turn that answered it."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    transcript_id: uuid.UUID
    seq: int
    """The user turn's position in its transcript."""
    turn_ids: list[str]
    text: str
    """`speaker: text` per turn, the reply cut to its first 200 characters."""
    occurred_at: datetime
    created_at: datetime


class MemoryDetail(MemoryRead):
    provenance: list[ProvenanceRead]
    history: list[AuditRead]
    conflicts: list[ConflictRead]
    rounds: list[RoundRead] = []
    """The rounds that show the turns the memory came from (what was said, as it was said), oldest first."""


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


# -- privileged writes, forget / verify / erase, working memory ---------------------------------------------

KEY_PATTERN = r"^[^\s\x00]{1,256}$"


class MemoryWrite(InputModel):
    """A structured write (`memory_write`): reconciled with the namespace like a distilled fact."""

    key: str = Field(pattern=KEY_PATTERN, max_length=256)
    """What the memory is about, specific enough to tell apart: `user.database`, `project.deadline`."""
    value: str = Field(min_length=1, max_length=2000)
    """Short, directly usable text: "User prefers PostgreSQL 15"."""
    kind: MemoryKind = MemoryKind.fact
    source: Source = Source.manual
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    ttl_days: int | None = Field(None, ge=1, le=36500)
    pinned: bool = False
    subject: str | None = Field(None, min_length=1, max_length=128)
    """Whom the fact is about; defaults to the key's first segment (`user`, `colleague:li`)."""

    @field_validator("value")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("value is blank")
        if "\x00" in v:
            raise ValueError("value contains a NUL character")
        return v.strip()


class RememberIn(InputModel):
    """Free text to remember. `metadata` may steer the write (kind, key, pinned, ttl_days, confidence,
    source); everything else in it is kept in the write's audit record."""

    content: str = Field(min_length=1, max_length=8000)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content is blank")
        if "\x00" in v:
            raise ValueError("content contains a NUL character")
        return v

    @field_validator("metadata")
    @classmethod
    def _small(cls, v: dict[str, Any]) -> dict[str, Any]:
        import json

        if len(json.dumps(v, ensure_ascii=False, default=str)) > 4000:
            raise ValueError("metadata is larger than 4000 characters of JSON")
        return v


class WriteResult(BaseModel):
    action: str
    """What reconcile decided: insert, refresh, merge, conflict or supersede."""
    reason: str
    memory: MemoryRead


class RememberResult(BaseModel):
    extracted: bool
    """True when the offline extractor found structured facts; False when the text was stored as a note."""
    results: list[WriteResult]


class ForgetIn(InputModel):
    reason: str | None = Field(None, max_length=500)


class VerifyIn(InputModel):
    confidence: float | None = Field(None, ge=0.0, le=1.0)
    """New confidence (never lowered by a verify); default: current + 0.1, capped by the source."""


class EraseSubjectIn(InputModel):
    """Erase everything of a subject: memories whose key starts with `key_prefix`, or whose subject is
    `subject` (at least one)."""

    key_prefix: str | None = Field(None, min_length=2, max_length=256)
    subject: str | None = Field(None, min_length=1, max_length=128)


class EraseResult(BaseModel):
    erase_id: uuid.UUID
    namespace: str
    memory_ids: list[uuid.UUID]
    transcripts_redacted: int
    turns_redacted: int
    episodes_redacted: int
    audit_rows_scrubbed: int
    log_lines_scrubbed: int
    scope: str = "memory"
    """What was erased: memory, subject, transcript or namespace."""
    transcripts_erased: int = 0
    """Transcripts deleted whole (transcript and namespace erase); their episodes go with them."""
    episodes_erased: int = 0
    rounds_erased: int = 0
    """Rounds deleted: those of erased transcripts, and those that showed a redacted turn or mentioned the erased."""
    sessions_scrubbed: int = 0
    """Working-memory turns redacted, or (namespace erase) sessions dropped."""


class WorkingMemoryTurn(BaseModel):
    seq: int
    role: str
    content: str
    name: str | None = None
    turn_id: str | None = None


class WorkingMemory(BaseModel):
    namespace: str
    session_id: str
    turns: list[WorkingMemoryTurn]
    """The last `max_turns` turns, trimmed to `max_tokens`, oldest first."""
