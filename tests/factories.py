"""Plain factory functions for rows the tests need to exist before the code under test runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from hindsight.config import get_settings
from hindsight.db.models import MemoryRow


def unit_vector(seed: int, dim: int | None = None) -> list[float]:
    dim = dim or get_settings().embedding.vector_dim
    v = [0.0] * dim
    v[seed % dim] = 1.0
    return v


def create_memory(engine: sa.Engine, namespace: str, **overrides: Any) -> uuid.UUID:
    values = memory_values(namespace, **overrides)
    with engine.begin() as conn:
        conn.execute(sa.insert(MemoryRow).values(**values))
    return values["id"]


def memory_values(namespace: str, **overrides: Any) -> dict[str, Any]:
    """The columns of one memory row (`at` sets every timestamp), for inserting one or many at once."""
    now = overrides.pop("at", datetime.now(UTC))
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "namespace": namespace,
        "kind": "preference",
        "key": f"user.k{uuid.uuid4().hex[:6]}",
        "value": "User prefers tea",
        "subject": "user",
        "source": "user",
        "confidence": 0.8,
        "state": "active",
        "pinned": False,
        "negated": False,
        "has_conflict": False,
        "embedding": unit_vector(1),
        "search_text": "",
        "backend": "test",
        "embedding_model": "test",
        "created_at": now,
        "updated_at": now,
        "last_verified_at": now,
        "state_changed_at": now,
    }
    values.update(overrides)
    return values
