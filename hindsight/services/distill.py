"""Distilling one accepted transcript: summarize -> extract -> conflict-detect/merge -> dedupe -> store, and
the transcript's rounds (pipeline/rounds.py) kept beside its episode.

The language work (possibly a slow LLM call) runs outside any transaction; every write for the transcript,
and its move to `done`, then commit together in one transaction, so a redelivered task finds nothing left
to do. `begin_attempt`, `record_failure` and `store_distilled` work in the caller's unit of work;
`distill_transcript` is the one service here that opens its own (see its docstring for why).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from sqlalchemy import Engine

from hindsight.collaborators import Clients
from hindsight.db.engine import Session, after_commit, session_scope
from hindsight.db.models import EpisodeRow, TranscriptRow
from hindsight.db.repositories import EpisodeRepository, RoundRepository, TranscriptRepository
from hindsight.errors import NotFound
from hindsight.services.memory_writer import MemoryWriter, lock_namespace, reconcile_in_namespace
from hindsight.textsearch import episode_search_text
from pipeline.rounds import Round, split_rounds
from schemas.pipeline import Distillation, EmbeddedFact, MemoryState, Transcript, Turn

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


def begin_attempt(
    session: Session, transcript_id: uuid.UUID, *, max_attempts: int, now: datetime
) -> TranscriptRow | None:
    """Count an attempt and return the transcript's row, or None if there is nothing to do.

    The caller commits the attempt before any work, so a transcript that kills its worker every time is
    dead-lettered after `max_attempts` instead of crash-looping; and parses the row (`to_transcript`) only
    after that commit, so a row that cannot be read still uses up an attempt.
    """
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
    return row


def record_failure(
    session: Session,
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
        after_commit(
            session,
            lambda: log.warning("transcript.dead_lettered", transcript_id=str(transcript_id), reason=error[:500]),
        )
    return final


def _dead(row: TranscriptRow, reason: str, now: datetime) -> None:
    row.state = "dead"
    row.last_error = reason[:2000]
    row.processed_at = now


@dataclass
class Distilled:
    """What the language work made of one transcript, embedded: ready to store."""

    distillation: Distillation
    facts: list[EmbeddedFact]
    summary_embedding: list[float]
    rounds: list[Round]
    round_embeddings: list[list[float]]


def distill_stages(transcript: Transcript, *, clients: Clients) -> Distilled:
    """Stages 1-2 and the embeddings (may call an LLM): no session, no transaction."""
    distillation = clients.backend.distill(transcript)
    facts = distillation.facts
    rounds = split_rounds(transcript, [(f.turn_ids, f.value) for f in facts if f.state != MemoryState.quarantined])
    vectors = clients.embedder.embed(
        [f.value for f in facts] + [distillation.summary.text] + [r.embed_text for r in rounds]
    )
    return Distilled(
        distillation=distillation,
        facts=[EmbeddedFact(fact=f, embedding=v) for f, v in zip(facts, vectors[: len(facts)], strict=True)],
        summary_embedding=vectors[len(facts)],
        rounds=rounds,
        round_embeddings=vectors[len(facts) + 1 :],
    )


def store_distilled(
    session: Session, transcript: Transcript, distilled: Distilled, *, clients: Clients, now: datetime
) -> Outcome:
    """Stages 3-4 and every write for the transcript, with its move to `done`, in the caller's unit of work.
    A transcript finished (done or dead) meanwhile is skipped."""
    settings = clients.settings
    distillation = distilled.distillation
    row = TranscriptRepository(session).get(transcript.id, for_update=True)
    if row is None or row.state in ("done", "dead"):
        return Outcome(transcript.id, "skipped", {})
    lock_namespace(session, transcript.namespace)
    ops, rows = reconcile_in_namespace(
        session,
        transcript.namespace,
        distilled.facts,
        dedupe_threshold=settings.embedding.effective_dedupe_threshold,
    )

    EpisodeRepository(session).add(
        EpisodeRow(
            namespace=transcript.namespace,
            transcript_id=transcript.id,
            summary=distillation.summary.text,
            entities=distillation.summary.entities,
            turn_ids=distillation.summary.turn_ids,
            embedding=distilled.summary_embedding,
            search_text=episode_search_text(distillation.summary.text, distillation.summary.entities),
            backend=distillation.backend,
            occurred_at=transcript.occurred_at,
        )
    )
    RoundRepository(session).add(
        transcript.namespace, transcript.id, transcript.occurred_at, distilled.rounds, distilled.round_embeddings
    )
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
    return Outcome(transcript.id, "done", counts)


def distill_transcript(
    transcript_id: uuid.UUID, *, clients: Clients, engine: Engine, now: datetime | None = None
) -> Outcome:
    """Run the four stages for one transcript and store the result. Safe to call twice.

    The one service that takes an engine and opens its units of work itself, because it needs two: the
    attempt is committed before the slow language work (a worker killed by this transcript still uses up an
    attempt), and no transaction is open while an LLM answers. Every write of the result then commits in the
    second unit of work, so a redelivered task finds nothing left to do."""
    settings = clients.settings
    now = now or datetime.now(UTC)
    with session_scope(engine) as session:
        row = begin_attempt(session, transcript_id, max_attempts=settings.worker.max_attempts, now=now)
    if row is None:
        return Outcome(transcript_id, "skipped", {})
    transcript = to_transcript(row)  # parsed after the commit (see begin_attempt)

    distilled = distill_stages(transcript, clients=clients)
    with session_scope(engine) as session:
        outcome = store_distilled(session, transcript, distilled, clients=clients, now=now)
    if outcome.status == "done":
        log.info(
            "distill.transcript.completed",
            transcript_id=str(transcript_id),
            namespace=transcript.namespace,
            backend=distilled.distillation.backend,
            facts=len(distilled.facts),
            ops=outcome.ops,
        )
    return outcome
