"""Dead letters: transcripts that failed `worker.max_attempts` times (or permanently), kept with their errors."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, select

from hindsight.db.engine import get_engine, read_session, session_scope
from hindsight.db.models import TranscriptRow
from hindsight.db.repositories import TranscriptRepository
from hindsight.queue import send_distill
from schemas.events import TranscriptStatus


def list_dead_letters(*, namespace: str | None = None, engine: Engine | None = None) -> list[TranscriptStatus]:
    with read_session(engine or get_engine()) as session:
        rows = TranscriptRepository(session).list_dead(namespace, limit=1000)
        return [TranscriptStatus.model_validate(r) for r in rows]


def requeue_dead_letters(
    *,
    ids: Sequence[uuid.UUID] | None,
    namespace: str | None = None,
    engine: Engine | None = None,
    send: Callable[[Iterable[uuid.UUID]], int] = send_distill,
) -> list[uuid.UUID]:
    """Reset dead transcripts to `accepted` with a fresh attempt budget, commit, then send them."""
    now = datetime.now(UTC)
    with session_scope(engine or get_engine()) as session:
        stmt = select(TranscriptRow).where(TranscriptRow.state == "dead").with_for_update()
        if ids is not None:
            stmt = stmt.where(TranscriptRow.id.in_(list(ids)))
        if namespace:
            stmt = stmt.where(TranscriptRow.namespace == namespace)
        rows = list(session.execute(stmt).scalars())
        for row in rows:
            row.state = "accepted"
            row.attempts = 0
            row.attempt_log = [*row.attempt_log, {"at": now.isoformat(), "requeued": True}]
            row.enqueued_at = now
            row.updated_at = now
        requeued = [r.id for r in rows]
    send(requeued)
    return requeued
