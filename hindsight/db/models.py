"""ORM models. The schema itself is created only by Alembic migrations (migrations/versions)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import numpy as np
from pgvector import HalfVector
from pgvector.sqlalchemy import HALFVEC
from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Embedding(HALFVEC):
    """An embedding column: stored as pgvector `halfvec` (migration 0011: half the bytes, kept in the row), read
    back as a float32 numpy array, as a `vector` column was, so callers never meet pgvector's HalfVector."""

    cache_ok = True

    def bind_processor(self, dialect: Any) -> Any:
        return halfvec_text

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        def process(value: Any) -> np.ndarray | None:
            if value is None:
                return None
            if isinstance(value, str):  # "[0.1,0.2,...]": parsed in C, not float() by float()
                return np.fromstring(value[1:-1], dtype=np.float32, sep=",")
            values = HalfVector._from_db(value)
            return None if values is None else np.asarray(values, dtype=np.float32)

        return process


def halfvec_text(value: Any) -> str | None:
    """A vector as pgvector's text input for a halfvec column: each component rounded to half precision here,
    then written to 5 significant digits, which name a binary16 value exactly, so the server stores the same
    halves as from pgvector's own encoder. That encoder writes every float32 digit, which the server then
    throws away: this is under half the characters and half the time (BENCHMARKS.md "Scaling out")."""
    if value is None:
        return None
    if isinstance(value, HalfVector):
        value = value.to_list()
    return "[" + ",".join([f"{x:.5g}" for x in np.asarray(value, dtype=np.float16).tolist()]) + "]"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class TranscriptRow(Base):
    """The inbox: every accepted transcript, stored before its task is sent."""

    __tablename__ = "transcripts"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    namespace: Mapped[str] = mapped_column(String(128), index=True)
    conversation_id: Mapped[str] = mapped_column(String(256))
    idempotency_key: Mapped[str] = mapped_column(String(256))
    event_type: Mapped[str] = mapped_column(String(32))
    turns: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    state: Mapped[str] = mapped_column(String(16), default="accepted")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    attempt_log: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    last_error: Mapped[str | None] = mapped_column(Text)
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )
    redactions: Mapped[list[str]] = mapped_column(JSONB, default=list)


class EpisodeRow(Base):
    """One summary per distilled transcript (episodic memory)."""

    __tablename__ = "episodes"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    namespace: Mapped[str] = mapped_column(String(128), index=True)
    transcript_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("transcripts.id", ondelete="CASCADE"), unique=True)
    summary: Mapped[str] = mapped_column(Text)
    entities: Mapped[list[str]] = mapped_column(JSONB, default=list)
    turn_ids: Mapped[list[str]] = mapped_column(JSONB, default=list)
    embedding: Mapped[list[float] | None] = mapped_column(Embedding())
    search_text: Mapped[str] = mapped_column(Text, default="")
    """Summary and entities segmented for full-text search (hindsight.textsearch.episode_search_text)."""
    content_tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('simple', search_text)", persisted=True))
    backend: Mapped[str] = mapped_column(String(128))
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class RoundRow(Base):
    """One user turn of a distilled transcript with the start of the turn that answered it
    (pipeline.rounds): a retrievable unit keyed by its text and by the facts distilled from it."""

    __tablename__ = "rounds"
    __table_args__ = (
        UniqueConstraint("transcript_id", "seq"),
        Index("ix_rounds_namespace_occurred_at", "namespace", "occurred_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    namespace: Mapped[str] = mapped_column(String(128))
    transcript_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("transcripts.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    """The user turn's position in the transcript."""
    turn_ids: Mapped[list[str]] = mapped_column(JSONB, default=list)
    text: Mapped[str] = mapped_column(Text)
    """What a reader is shown (the reply cut short)."""
    embedding: Mapped[list[float]] = mapped_column(Embedding())
    search_text: Mapped[str] = mapped_column(Text, default="")
    """Both turns whole and the values of the facts distilled from them, segmented for full-text search."""
    content_tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('simple', search_text)", persisted=True))
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class MemoryAccessRow(Base):
    """How often recall returned a memory, and when last (migration 0014_memory_access). A narrow row beside the
    memory, so that counting an access is a HOT update of 50 bytes instead of a new version of the memory row
    (and, once its page is full, a new entry in every index of `memories`, the HNSW graphs included)."""

    __tablename__ = "memory_access"

    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    """The memory's id. No foreign key (its check would lock, and so write, the memory row): triggers on
    `memories` delete the counts with the memory."""
    access_count: Mapped[int] = mapped_column(Integer, default=0)
    last_accessed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MemoryRow(Base):
    """Semantic memory: one stable fact or preference."""

    __tablename__ = "memories"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    namespace: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    key: Mapped[str] = mapped_column(String(256))
    value: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(String(128), default="user")
    source: Mapped[str] = mapped_column(String(16))
    confidence: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16), default="active")
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    negated: Mapped[bool] = mapped_column(Boolean, default=False)
    ttl_days: Mapped[int | None] = mapped_column(Integer)
    has_conflict: Mapped[bool] = mapped_column(Boolean, default=False)
    embedding: Mapped[list[float]] = mapped_column(Embedding())
    search_text: Mapped[str] = mapped_column(Text, default="")
    """Key, slot topic words and value, segmented for full-text search (jieba for Chinese)."""
    also_slots: Mapped[list[str]] = mapped_column(JSONB, default=list, server_default=text("'[]'::jsonb"))
    """Other registry slots the value fills (the extractor's runner-up): their topic words are in search_text too."""
    search_vocab: Mapped[str | None] = mapped_column(String(32))
    """The slot vocabulary (`pipeline.slots.VOCAB_VERSION`) search_text was built with; the reindex job rebuilds
    rows built with another."""
    content_tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('simple', search_text)", persisted=True))
    backend: Mapped[str] = mapped_column(String(128))
    """The language back-end (and prompt version) that produced the memory."""
    embedding_model: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_verified_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    state_changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # Read-only: the counts live in `memory_access` (MemoryAccessRow), written only by recall's batched flush.
    access_count: Mapped[int] = column_property(
        func.coalesce(select(MemoryAccessRow.access_count).where(MemoryAccessRow.memory_id == id).scalar_subquery(), 0)
    )
    last_accessed_at: Mapped[datetime | None] = column_property(
        select(MemoryAccessRow.last_accessed_at).where(MemoryAccessRow.memory_id == id).scalar_subquery()
    )


class LifecycleWindowRow(Base):
    """A lifecycle window in use: scope `key` (a key attribute), `kind`, or `default` (name ''). The lifecycle
    job writes these from the settings and the slot registry; the due-time trigger reads them."""

    __tablename__ = "lifecycle_windows"

    scope: Mapped[str] = mapped_column(String(8), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    stale_days: Mapped[int | None] = mapped_column(Integer)
    archive_days: Mapped[int | None] = mapped_column(Integer)


class LifecycleDueRow(Base):
    """When a memory's next lifecycle step is due (stale, then archived): one row per memory that has one, kept by
    a trigger on `memories` from `lifecycle_windows` (migration 0013_lifecycle_due). It lives beside the memory so
    that a move changes no indexed column of `memories` (a HOT update, no new HNSW entry)."""

    __tablename__ = "lifecycle_due"

    memory_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ProvenanceRow(Base):
    """Which transcript turns a memory came from."""

    __tablename__ = "memory_provenance"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"), index=True)
    transcript_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("transcripts.id", ondelete="SET NULL"), index=True
    )
    turn_ids: Mapped[list[str]] = mapped_column(JSONB, default=list)
    action: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class AuditRow(Base):
    """Append-only history of every change to a memory (a trigger forbids UPDATE and DELETE)."""

    __tablename__ = "memory_audit"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), index=True)
    namespace: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(32))
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    transcript_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    actor: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ConflictRow(Base):
    __tablename__ = "memory_conflicts"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    namespace: Mapped[str] = mapped_column(String(128), index=True)
    old_memory_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"))
    new_memory_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(Text)
    resolution: Mapped[str] = mapped_column(String(16), default="open")
    """open (both kept) or superseded (the old one was archived)."""
    transcript_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
