"""Typed records passed between the pipeline stages.

Nothing here knows about Celery, HTTP or SQL: the stages in `pipeline/` take and return these.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    tool = "tool"
    system = "system"


class Source(StrEnum):
    """Who said a fact. Confidence is capped by source (see pipeline.reconcile.SOURCE_CONFIDENCE_CAP)."""

    user = "user"
    assistant = "assistant"  # an assistant claim the user confirmed becomes `user`
    tool = "tool"  # tool / web / file / e-mail text: never the user speaking
    manual = "manual"  # an explicit write through an API


class MemoryKind(StrEnum):
    preference = "preference"
    fact = "fact"
    profile = "profile"
    project = "project"
    decision = "decision"
    habit = "habit"
    relationship = "relationship"
    observation = "observation"  # attributed, low-trust text from tools; never active as a user fact


class MemoryState(StrEnum):
    active = "active"
    stale = "stale"
    archived = "archived"
    quarantined = "quarantined"


class Turn(BaseModel):
    """One turn of a transcript as the pipeline sees it."""

    model_config = ConfigDict(frozen=True)

    index: int
    """Position in the transcript, 0-based."""
    turn_id: str
    """Caller's id for the turn (e.g. LoCoMo `dia_id`), or str(index) when none was given."""
    role: Role
    content: str
    name: str | None = None
    """Tool name for tool turns (web_fetch, file_read, email, search, ...); on user turns, the speaker's name."""


class Transcript(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    namespace: str
    conversation_id: str
    turns: list[Turn]
    occurred_at: datetime
    """Trusted time of the conversation (from the ingest event, never from the text)."""


class EpisodeSummary(BaseModel):
    """Stage 1 output: who said what, what was done, what was concluded."""

    text: str
    entities: list[str] = Field(default_factory=list)
    turn_ids: list[str] = Field(default_factory=list)
    """Only the turns the summary's sentences came from."""


class CandidateFact(BaseModel):
    """Stage 2 output: one stable fact worth remembering."""

    kind: MemoryKind
    key: str
    """Subject + attribute, e.g. `user.database`, `user.city`, `colleague:li.language`."""
    value: str
    """Short, directly usable text, e.g. "用户在用 PostgreSQL 15" / "User prefers dark mode"."""
    source: Source
    confidence: float = Field(ge=0.0, le=1.0)
    turn_ids: list[str]
    """Turns the value was taken from (plus the confirming turn, when a confirmation made it)."""
    subject: str = "user"
    negated: bool = False
    """The fact states an absence/negation ("not allergic to penicillin", "不吃辣")."""
    supersedes_previous: bool = False
    """A change-of-state cue ("switched to", "搬到", "no longer") says an older value is now wrong."""
    state: MemoryState = MemoryState.active
    """`quarantined` for content that must not become active (e.g. tool text posing as a preference)."""
    also_slots: list[str] = Field(default_factory=list, max_length=4)
    """Other registry slots the value fills as well ("User has two kids and a dog": pet, and family): search
    indexes their topic words too, and reconcile compares a change with memories filed under them."""


class Distillation(BaseModel):
    """What a language back-end produced for one transcript."""

    summary: EpisodeSummary
    facts: list[CandidateFact]
    backend: str
    """e.g. `offline/1` or `openai:gpt-4o-mini/extract_v1`; stored on every row as prompt_version/model."""


class ExistingMemory(BaseModel):
    """A stored memory as reconcile sees it."""

    id: uuid.UUID
    kind: MemoryKind
    key: str
    value: str
    source: Source
    confidence: float
    state: MemoryState
    pinned: bool = False
    negated: bool = False
    embedding: list[float] | None = None
    also_slots: list[str] = Field(default_factory=list)
    """Other registry slots its value fills (`CandidateFact.also_slots`)."""


class EmbeddedFact(BaseModel):
    fact: CandidateFact
    embedding: list[float]


OpAction = Literal["insert", "refresh", "merge", "conflict", "supersede"]


class MemoryOp(BaseModel):
    """Stage 3+4 output: one decision about one candidate fact.

    - insert: store `fact` as a new memory.
    - refresh: `target_id` already says this; bump confidence/last_verified, add provenance.
    - merge: `target_id` is refined by `fact`; replace its value with `merged_value`, add provenance.
    - conflict: insert `fact`, mark both as conflicting, lower the old one's confidence to `new_confidence`.
    - supersede: insert `fact`, archive `target_id` (change of state, or a strong/explicit contradiction).
    """

    action: OpAction
    fact: CandidateFact
    embedding: list[float]
    new_id: uuid.UUID | None = None
    """Id of the memory an insert/conflict/supersede creates (later ops of the same batch may target it)."""
    target_id: uuid.UUID | None = None
    merged_value: str | None = None
    new_confidence: float | None = None
    reason: str = ""
