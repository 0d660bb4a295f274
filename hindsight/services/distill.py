"""Distilling one accepted transcript: summarize -> extract -> conflict-detect/merge -> dedupe -> store, and
the transcript's rounds (pipeline/rounds.py) kept beside its episode.

The language work (possibly a slow LLM call) runs outside any transaction; every write for the transcript,
and its move to `done`, then commit together in one transaction, so a redelivered task finds nothing left
to do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from sqlalchemy import Engine

from hindsight.clients import Clients
from hindsight.db.engine import session_scope
from hindsight.db.models import EpisodeRow, TranscriptRow
from hindsight.db.repositories import EpisodeRepository, RoundRepository, TranscriptRepository
from hindsight.errors import NotFound
from hindsight.services.store import MemoryWriter, lock_namespace, reconcile_in_namespace
from hindsight.textsearch import episode_search_text
from pipeline.rounds import split_rounds
from schemas.pipeline import EmbeddedFact, MemoryState, Transcript, Turn

log = structlog.get_logger(__name__)
ACTOR = "distiller"


@dataclass
class Outcome:
    transcript_id: uuid.UUID
    status: str
    """done | skipped (already done or dead) | dead"""
    ops: dict[str, int]


def to_transcript(row: TranscriptRow) -> Transcript:
    return Transcript(
        id=row.id,
        namespace=row.namespace,
        conversation_id=row.conversation_id,
        occurred_at=row.occurred_at,
        turns=[
            Turn(index=i, turn_id=t["turn_id"], role=t["role"], content=t["content"], name=t.get("name"))
            for i, t in enumerate(row.turns)
        ],
    )


def begin_attempt(engine: Engine, transcript_id: uuid.UUID, *, max_attempts: int, now: datetime) -> Transcript | None:
    """Count an attempt and return the transcript, or None if there is nothing to do.

    The attempt is counted (and committed) before any work, so a transcript that kills its worker every
    time is dead-lettered after `max_attempts` instead of crash-looping.
    """
    with session_scope(engine) as session:
        repo = TranscriptRepository(session)
        row = repo.get(transcript_id, for_update=True)
        if row is None:
            raise NotFound(f"transcript {transcript_id} does not exist")
        if row.state in ("done", "dead"):
            return None
        if row.attempts >= max_attempts:
            _dead(
                row,
                f"gave up after {row.attempts} attempts (last error: {row.last_error or 'worker lost'})",
                now,
            )
            log.warning("transcript.dead_lettered", transcript_id=str(row.id), reason=row.last_error)
            return None
        row.attempts += 1
        row.state = "processing"
        row.updated_at = now
    # Parsed after the commit: a row that cannot be read must still use up an attempt, or it would be
    # retried forever instead of being dead-lettered.
    return to_transcript(row)


def record_failure(
    engine: Engine,
    transcript_id: uuid.UUID,
    error: str,
    *,
    permanent: bool,
    max_attempts: int,
    now: datetime | None = None,
) -> bool:
    """Keep the error in the attempt history. Returns True when the transcript was dead-lettered.

    A permanent error dead-letters at once; any other error does so once `max_attempts` are used up.
    """
    now = now or datetime.now(UTC)
    with session_scope(engine) as session:
        row = TranscriptRepository(session).get(transcript_id, for_update=True)
        if row is None or row.state == "done":
            return False
        entry = {"at": now.isoformat(), "attempt": row.attempts, "error": error[:500]}
        if row.state == "dead":
            # Dead-lettered meanwhile (a redelivery found the attempts used up while this one ran): the attempt
            # was counted, so its error still belongs in the history.
            if not any(a.get("attempt") == row.attempts for a in row.attempt_log):
                row.attempt_log = [*row.attempt_log, entry]
            return False
        row.last_error = error[:2000]
        row.attempt_log = [*row.attempt_log, entry]
        final = permanent or row.attempts >= max_attempts
        if final:
            _dead(row, error, now)
        else:
            row.state = "accepted"
        row.updated_at = now
    if final:
        log.warning("transcript.dead_lettered", transcript_id=str(transcript_id), reason=error[:500])
    return final


def _dead(row: TranscriptRow, reason: str, now: datetime) -> None:
    row.state = "dead"
    row.last_error = reason[:2000]
    row.processed_at = now


def distill_transcript(
    transcript_id: uuid.UUID, *, clients: Clients, engine: Engine, now: datetime | None = None
) -> Outcome:
    """Run the four stages for one transcript and store the result. Safe to call twice."""
    settings = clients.settings
    now = now or datetime.now(UTC)
    transcript = begin_attempt(engine, transcript_id, max_attempts=settings.worker.max_attempts, now=now)
    if transcript is None:
        return Outcome(transcript_id, "skipped", {})

    # Stages 1-2 (may call an LLM): no transaction open while they run.
    distillation = clients.backend.distill(transcript)
    facts = distillation.facts
    rounds = split_rounds(transcript, [(f.turn_ids, f.value) for f in facts if f.state != MemoryState.quarantined])
    vectors = clients.embedder.embed(
        [f.value for f in facts] + [distillation.summary.text] + [r.embed_text for r in rounds]
    )
    embedded = [EmbeddedFact(fact=f, embedding=v) for f, v in zip(facts, vectors[: len(facts)], strict=True)]
    summary_vec = vectors[len(facts)]
    round_vecs = vectors[len(facts) + 1 :]

    with session_scope(engine) as session:
        row = TranscriptRepository(session).get(transcript_id, for_update=True)
        if row is None or row.state in ("done", "dead"):
            return Outcome(transcript_id, "skipped", {})
        lock_namespace(session, transcript.namespace)
        ops, rows = reconcile_in_namespace(
            session, transcript.namespace, embedded, dedupe_threshold=settings.embedding.effective_dedupe_threshold
        )

        EpisodeRepository(session).add(
            EpisodeRow(
                namespace=transcript.namespace,
                transcript_id=transcript.id,
                summary=distillation.summary.text,
                entities=distillation.summary.entities,
                turn_ids=distillation.summary.turn_ids,
                embedding=summary_vec,
                search_text=episode_search_text(distillation.summary.text, distillation.summary.entities),
                backend=distillation.backend,
                occurred_at=transcript.occurred_at,
            )
        )
        RoundRepository(session).add(transcript.namespace, transcript.id, transcript.occurred_at, rounds, round_vecs)
        writer = MemoryWriter(
            session=session,
            namespace=transcript.namespace,
            transcript_id=transcript.id,
            occurred_at=transcript.occurred_at,
            actor=ACTOR,
            backend=distillation.backend,
            embedding_model=clients.embedder.name,
            now=now,
            rows=rows,
        )
        counts: dict[str, int] = {}
        for op in ops:
            writer.apply(op)
            counts[op.action] = counts.get(op.action, 0) + 1
        row.state = "done"
        row.processed_at = now
        row.updated_at = now
        row.last_error = None
    log.info(
        "distill.transcript.completed",
        transcript_id=str(transcript_id),
        namespace=transcript.namespace,
        backend=distillation.backend,
        facts=len(facts),
        ops=counts,
    )
    return Outcome(transcript_id, "done", counts)
