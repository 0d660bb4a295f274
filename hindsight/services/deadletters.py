"""Dead letters: transcripts that failed `worker.max_attempts` times (or permanently), kept with their errors."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from hindsight.db.engine import ReadSession, Session, after_commit
from hindsight.db.repositories import TranscriptRepository
from hindsight.queue import Publisher
from schemas.events import TranscriptStatus


def list_dead_letters(session: ReadSession, *, namespace: str | None = None) -> list[TranscriptStatus]:
    rows = TranscriptRepository(session).list_dead(namespace, limit=1000)
    return [TranscriptStatus.model_validate(r) for r in rows]


def requeue_dead_letters(
    session: Session,
    *,
    ids: Sequence[uuid.UUID] | None,
    publisher: Publisher,
    namespace: str | None = None,
) -> list[uuid.UUID]:
    """Reset dead transcripts to `accepted` with a fresh attempt budget; once the caller's unit of work
    commits, send them (a failed send then reaches the caller, with the rows committed for the sweeper)."""
    now = datetime.now(UTC)
    rows = TranscriptRepository(session).lock_dead(ids, namespace)
    for row in rows:
        row.state = "accepted"
        row.attempts = 0
        row.attempt_log = [*row.attempt_log, {"at": now.isoformat(), "requeued": True}]
        row.enqueued_at = now
        row.updated_at = now
    requeued = [r.id for r in rows]
    after_commit(session, lambda: publisher.send_distill(requeued))
    return requeued
