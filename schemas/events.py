"""Ingest events: what an agent posts when a conversation ends or a turn threshold is reached."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, field_validator

from schemas.inputs import InputModel
from schemas.pipeline import Role

NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
Namespace = Annotated[str, StringConstraints(pattern=NAMESPACE_PATTERN, max_length=128)]

LSN_HEADER = "X-Hindsight-LSN"
"""What a successful write answers with when reads may go to a replica: the primary's WAL position after it."""
MIN_LSN_HEADER = "X-Hindsight-Min-LSN"
"""What a read sends to see every write up to that position: the replica serves it if it has replayed that
far, else the primary does."""


class EventType(StrEnum):
    conversation_end = "conversation_end"
    turn_threshold = "turn_threshold"


class TurnIn(InputModel):
    role: Role
    content: str = Field(min_length=1, max_length=200_000)
    name: str | None = Field(default=None, max_length=128)
    """Tool name for tool turns (web_fetch, file_read, email, search, ...); on user turns, the speaker's name.
    When user turns carry two or more different names, each speaker's statements are about that person."""
    turn_id: str | None = Field(default=None, max_length=128)
    """Caller's turn id (kept as provenance); defaults to the turn's position."""

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("turn content is blank")
        if "\x00" in v:
            raise ValueError("turn content contains a NUL character")
        return v


class TranscriptIn(InputModel):
    """One transcript to distill. `occurred_at` is the trusted time of the conversation."""

    namespace: Namespace
    conversation_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=256)
    event_type: EventType = EventType.conversation_end
    turns: list[TurnIn] = Field(min_length=1)
    occurred_at: datetime | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)
    """Same key, same namespace: accepted once. Defaults to a hash of the transcript's content."""

    @field_validator("occurred_at")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("occurred_at must carry a timezone (e.g. 2026-01-02T03:04:05Z)")
        return v


class TranscriptBody(InputModel):
    """HTTP ingest body: the namespace comes from the URL, never from the body."""

    conversation_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=256)
    event_type: EventType = EventType.conversation_end
    turns: list[TurnIn] = Field(min_length=1)
    occurred_at: AwareDatetime | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)


class TranscriptAccepted(BaseModel):
    id: uuid.UUID
    namespace: str
    state: str
    duplicate: bool
    """True when this idempotency key had already been accepted (nothing new was stored)."""


class TranscriptStatus(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    namespace: str
    conversation_id: str
    event_type: str
    state: str
    attempts: int
    last_error: str | None
    attempt_log: list[dict[str, object]]
    received_at: datetime
    processed_at: datetime | None
    redactions: list[str]
