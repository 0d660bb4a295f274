"""Read models of hybrid recall: one hit with the parts of its score, and the result of one query."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field

from schemas.memories import EpisodeRead, MemoryRead, ProvenanceRead, RoundRead


class ScoreParts(BaseModel):
    """The inputs of a hit's score, each in [0, 1] (see hindsight/services/recall.py for the fusion)."""

    vector: float = Field(ge=0.0, le=1.0)
    """Cosine similarity rescaled per embedding model (0 = unrelated, 1 = a clearly relevant paraphrase)."""
    keyword: float = Field(ge=0.0, le=1.0)
    """Share of the query's informative terms (IDF-weighted) found in the memory's text."""
    recency: float = Field(ge=0.0, le=1.0)
    """time_decay_factor ** days since last verification (1 for pinned memories)."""
    trust: float = Field(ge=0.0, le=1.0)
    """confidence x the state's factor (stale ranks lower)."""


class RecallHit(BaseModel):
    memory: MemoryRead
    score: float
    parts: ScoreParts
    age_days: float
    """Days since the memory was last verified (at the time of the query)."""
    last_verified_at: datetime
    provenance: list[ProvenanceRead]
    """Which transcripts and turns the memory came from."""

    @property
    def content(self) -> str:
        return self.memory.value


class RecallResult(BaseModel):
    query: str
    hits: list[RecallHit]
    tokens: int | None = None
    """With `budget_tokens`: what the hits take rendered as the context block renders memories (the block's
    header included), counted with the model's tokenizer, at most the budget. None without a budget."""
    truncated: bool = False
    """With `budget_tokens`: some hit recall found was left out to stay within it."""


class ConversationHit(BaseModel):
    """What episode and round hits share: one score formula (hindsight/services/recall.py `_units`)."""

    score: float = Field(ge=0.0, le=1.0)
    """Meaning and keywords (and time, when the query names one) fused with recall's weights."""
    vector: float = Field(0.0, ge=0.0, le=1.0)
    """The cosine rescaled per embedding model, as ScoreParts.vector (0 = unrelated)."""
    keyword: float = Field(0.0, ge=0.0, le=1.0)
    """Share of the query's informative terms (IDF-weighted) in the unit's text: a summary and its entities, or a
    round's turns and the facts taken from them."""
    cosine: float
    age_days: float
    """Days since the conversation took place (at the time of the query)."""
    time: float | None = None
    """How close the conversation is to the time the query names (1 inside it), or None when it names none."""


class EpisodeHit(ConversationHit):
    """An episode summary (one distilled conversation) near the query."""

    episode: EpisodeRead

    @property
    def content(self) -> str:
        return self.episode.summary


class EpisodeRecallResult(BaseModel):
    query: str
    hits: list[EpisodeHit]


class RoundMemory(BaseModel):
    """A memory distilled from a round's turns."""

    id: uuid.UUID
    key: str
    value: str
    state: str


class RoundHit(ConversationHit):
    """A round (a user turn and the start of its reply) near the query, scored as episodes are."""

    round: RoundRead
    memories: list[RoundMemory] = []
    """The memories distilled from the round's turns (active, stale or archived), oldest first."""

    @property
    def content(self) -> str:
        return self.round.text


class RoundRecallResult(BaseModel):
    query: str
    hits: list[RoundHit]
