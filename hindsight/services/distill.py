"""Distilling one accepted transcript: summarize -> extract -> conflict-detect/merge -> dedupe -> store.

The language work (possibly a slow LLM call) runs outside any transaction; every write for the transcript,
and its move to `done`, then commit together in one transaction, so a redelivered task finds nothing left
to do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import Engine

from hindsight.clients import Clients
from hindsight.db.engine import session_scope
from hindsight.db.models import ConflictRow, EpisodeRow, MemoryRow, TranscriptRow
from hindsight.db.repositories import (
    AuditRepository,
    ConflictRepository,
    EpisodeRepository,
    MemoryRepository,
    ProvenanceRepository,
    TranscriptRepository,
    advisory_xact_lock,
)
from hindsight.errors import NotFound
from hindsight.textsearch import search_text
from pipeline.reconcile import SOURCE_CONFIDENCE_CAP, reconcile
from schemas.pipeline import (
    CandidateFact,
    EmbeddedFact,
    ExistingMemory,
    MemoryKind,
    MemoryOp,
    MemoryState,
    Source,
    Transcript,
    Turn,
)

log = structlog.get_logger(__name__)
ACTOR = "distiller"
NEIGHBOURS_PER_FACT = 8


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
        if row is None or row.state in ("done", "dead"):
            return False
        row.last_error = error[:2000]
        row.attempt_log = [
            *row.attempt_log,
            {"at": now.isoformat(), "attempt": row.attempts, "error": error[:500]},
        ]
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
    vectors = clients.embedder.embed([f.value for f in facts] + [distillation.summary.text])
    embedded = [EmbeddedFact(fact=f, embedding=v) for f, v in zip(facts, vectors[:-1], strict=True)]
    summary_vec = vectors[-1]

    with session_scope(engine) as session:
        row = TranscriptRepository(session).get(transcript_id, for_update=True)
        if row is None or row.state in ("done", "dead"):
            return Outcome(transcript_id, "skipped", {})
        # One writer per namespace at a time: reconcile must see every memory committed before it.
        advisory_xact_lock(session, "namespace", transcript.namespace)
        memories = MemoryRepository(session)
        existing_rows = memories.candidates_for_reconcile(
            transcript.namespace,
            sorted({f.key for f in facts}),
            [e.embedding for e in embedded],
            NEIGHBOURS_PER_FACT,
        )
        existing = [_existing(r) for r in existing_rows]
        ops = reconcile(embedded, existing, dedupe_threshold=settings.embedding.effective_dedupe_threshold)

        EpisodeRepository(session).add(
            EpisodeRow(
                namespace=transcript.namespace,
                transcript_id=transcript.id,
                summary=distillation.summary.text,
                entities=distillation.summary.entities,
                turn_ids=distillation.summary.turn_ids,
                embedding=summary_vec,
                backend=distillation.backend,
                occurred_at=transcript.occurred_at,
            )
        )
        writer = _Writer(
            session=session,
            transcript=transcript,
            backend=distillation.backend,
            embedding_model=clients.embedder.name,
            now=now,
            rows={r.id: r for r in existing_rows},
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


def _existing(row: MemoryRow) -> ExistingMemory:
    return ExistingMemory(
        id=row.id,
        kind=MemoryKind(row.kind) if row.kind in MemoryKind.__members__ else MemoryKind.fact,
        key=row.key,
        value=row.value,
        source=Source(row.source),
        confidence=row.confidence,
        state=MemoryState(row.state),
        pinned=row.pinned,
        negated=row.negated,
        embedding=list(row.embedding) if row.embedding is not None else None,
    )


@dataclass
class _Writer:
    """Applies reconcile's decisions: rows, provenance, conflicts, audit history and logs."""

    session: Any
    transcript: Transcript
    backend: str
    embedding_model: str
    now: datetime
    rows: dict[uuid.UUID, MemoryRow]

    def apply(self, op: MemoryOp) -> None:
        if op.action == "insert":
            self._insert(op)
        elif op.action == "refresh":
            self._refresh(op)
        elif op.action == "merge":
            self._merge(op)
        elif op.action in ("conflict", "supersede"):
            self._contradict(op)
        else:  # pragma: no cover - reconcile's OpAction is closed
            raise ValueError(f"unknown op {op.action}")

    # -- helpers -------------------------------------------------------------------------------------------
    def _audit(self, memory: MemoryRow, action: str, detail: dict[str, Any], **kw: Any) -> None:
        AuditRepository(self.session).add(
            memory_id=memory.id,
            namespace=memory.namespace,
            action=action,
            actor=ACTOR,
            detail=detail,
            transcript_id=self.transcript.id,
            at=self.now,
            **kw,
        )
        log.info(
            f"memory.{action}",
            memory_id=str(memory.id),
            namespace=memory.namespace,
            key=memory.key,
            transcript_id=str(self.transcript.id),
            **{k: v for k, v in detail.items() if k in ("reason", "confidence", "other_memory_id")},
        )

    def _provenance(self, memory_id: uuid.UUID, fact: CandidateFact, action: str) -> None:
        ProvenanceRepository(self.session).add(memory_id, self.transcript.id, list(fact.turn_ids), action)

    def _target(self, op: MemoryOp) -> MemoryRow:
        assert op.target_id is not None, f"{op.action} without target_id"
        row = self.rows.get(op.target_id)
        if row is None:
            row = MemoryRepository(self.session).get(self.transcript.namespace, op.target_id, for_update=True)
            if row is None:
                raise NotFound(f"reconcile targeted unknown memory {op.target_id}")
            self.rows[row.id] = row
        return row

    def _cap(self, fact: CandidateFact, confidence: float) -> float:
        return round(min(confidence, SOURCE_CONFIDENCE_CAP.get(fact.source, 1.0)), 4)

    # -- ops -----------------------------------------------------------------------------------------------
    def _insert(self, op: MemoryOp) -> MemoryRow:
        fact = op.fact
        at = min(self.transcript.occurred_at, self.now)
        row = MemoryRow(
            id=op.new_id or uuid.uuid4(),
            namespace=self.transcript.namespace,
            kind=fact.kind.value,
            key=fact.key,
            value=fact.value,
            subject=fact.subject,
            source=fact.source.value,
            confidence=self._cap(fact, fact.confidence),
            state=fact.state.value,
            pinned=False,
            negated=fact.negated,
            has_conflict=False,
            embedding=op.embedding,
            search_text=search_text(f"{fact.key.replace('.', ' ').replace('_', ' ')} {fact.value}"),
            backend=self.backend,
            embedding_model=self.embedding_model,
            created_at=at,
            updated_at=self.now,
            last_verified_at=at,
            state_changed_at=self.now,
            access_count=0,
        )
        MemoryRepository(self.session).add(row)
        self.session.flush()
        self.rows[row.id] = row
        self._provenance(row.id, fact, "created")
        self._audit(
            row,
            "created",
            {
                "value": fact.value,
                "key": fact.key,
                "kind": fact.kind.value,
                "confidence": row.confidence,
                "source": fact.source.value,
                "reason": op.reason,
            },
            to_state=row.state,
        )
        return row

    def _refresh(self, op: MemoryOp) -> None:
        row = self._target(op)
        before = row.state
        row.confidence = self._cap(op.fact, max(row.confidence, op.fact.confidence) + 0.05)
        at = min(self.transcript.occurred_at, self.now)
        row.last_verified_at = max(row.last_verified_at, at)
        row.updated_at = self.now
        if row.state == "stale":  # re-confirmation revives
            row.state = "active"
            row.state_changed_at = self.now
        self._provenance(row.id, op.fact, "refreshed")
        self._audit(
            row,
            "refreshed",
            {"confidence": row.confidence, "reason": op.reason, "candidate": op.fact.value},
            from_state=before,
            to_state=row.state,
        )

    def _merge(self, op: MemoryOp) -> None:
        row = self._target(op)
        before_value, before_state = row.value, row.state
        row.value = op.merged_value or op.fact.value
        row.embedding = op.embedding
        row.search_text = search_text(f"{row.key.replace('.', ' ').replace('_', ' ')} {row.value}")
        row.confidence = self._cap(op.fact, max(row.confidence, op.fact.confidence))
        row.last_verified_at = max(row.last_verified_at, min(self.transcript.occurred_at, self.now))
        row.updated_at = self.now
        if row.state == "stale":
            row.state = "active"
            row.state_changed_at = self.now
        self._provenance(row.id, op.fact, "merged")
        self._audit(
            row,
            "merged",
            {
                "old_value": before_value,
                "value": row.value,
                "reason": op.reason,
                "confidence": row.confidence,
            },
            from_state=before_state,
            to_state=row.state,
        )

    def _contradict(self, op: MemoryOp) -> None:
        target = self._target(op)
        inserted = self._insert(op)
        # Transcripts can be distilled out of order (a retry, a swept message): knowledge verified after
        # this conversation took place is the newer one, so the contradiction retires the incoming fact.
        late = target.last_verified_at > min(self.transcript.occurred_at, self.now)
        old, new = (inserted, target) if late else (target, inserted)
        before = old.state
        supersede = op.action == "supersede"
        if supersede:
            old.state = "archived"
            old.state_changed_at = self.now
        else:
            old.has_conflict = True
            new.has_conflict = True
            if op.new_confidence is not None:
                old.confidence = round(min(old.confidence, op.new_confidence), 4)
        old.updated_at = self.now
        ConflictRepository(self.session).add(
            ConflictRow(
                namespace=old.namespace,
                old_memory_id=old.id,
                new_memory_id=new.id,
                reason=op.reason or op.action,
                resolution="superseded" if supersede else "open",
                transcript_id=self.transcript.id,
            )
        )
        self._audit(
            old,
            "superseded" if supersede else "conflict",
            {"other_memory_id": str(new.id), "reason": op.reason, "confidence": old.confidence, "late": late},
            from_state=before,
            to_state=old.state,
        )
        if not supersede:
            self._audit(new, "conflict", {"other_memory_id": str(old.id), "reason": op.reason}, to_state=new.state)
