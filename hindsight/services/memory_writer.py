"""The one way facts become memories: reconcile with the namespace, then apply the decisions.

Distillation (facts from a transcript) and privileged writes (`memory_write`, `remember`) both go through
`reconcile_in_namespace` and `MemoryWriter`, so a manual write is conflict-checked and deduped exactly like a
distilled fact, and leaves the same provenance, conflict, audit and log records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from hindsight.db.engine import Session
from hindsight.db.models import ConflictRow, MemoryRow
from hindsight.db.repositories import (
    AuditRepository,
    ConflictRepository,
    MemoryRepository,
    ProvenanceRepository,
    advisory_xact_lock,
)
from hindsight.errors import NotFound
from hindsight.textsearch import SEARCH_VOCAB, memory_search_text
from pipeline.reconcile import SOURCE_CONFIDENCE_CAP, reconcile
from schemas.pipeline import (
    CandidateFact,
    EmbeddedFact,
    ExistingMemory,
    MemoryKind,
    MemoryOp,
    MemoryState,
    Source,
)

log = structlog.get_logger(__name__)
NEIGHBOURS_PER_FACT = 8


def lock_namespace(session: Session, namespace: str) -> None:
    """One writer per namespace at a time: reconcile must see every memory committed before it."""
    advisory_xact_lock(session, "namespace", namespace)


def reconcile_in_namespace(
    session: Session,
    namespace: str,
    facts: Sequence[EmbeddedFact],
    *,
    dedupe_threshold: float,
    by_statement: bool = True,
) -> tuple[list[MemoryOp], dict[uuid.UUID, MemoryRow]]:
    """Stages 3-4 against the namespace's live memories. Call with the namespace lock held. `by_statement` off:
    exactly one decision per fact, in order (see `pipeline.reconcile.reconcile`)."""
    rows = MemoryRepository(session).candidates_for_reconcile(
        namespace,
        sorted({k for f in facts for k in (f.fact.key, *_also_keys(f.fact))}),
        [f.embedding for f in facts],
        NEIGHBOURS_PER_FACT,
    )
    ops = reconcile(
        list(facts), [_existing(r) for r in rows], dedupe_threshold=dedupe_threshold, by_statement=by_statement
    )
    return ops, {r.id: r for r in rows}


def _also_keys(fact: CandidateFact) -> list[str]:
    """The fact's subject under each other slot its value fills (`user.family` beside `user.pet`)."""
    subject = fact.key.partition(".")[0]
    return [f"{subject}.{slot}" for slot in fact.also_slots]


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
        also_slots=list(row.also_slots or ()),
    )


@dataclass
class MemoryWriter:
    """Applies reconcile's decisions: rows, provenance, conflicts, audit history and logs."""

    session: Session
    namespace: str
    transcript_id: uuid.UUID | None
    """The transcript the facts came from; None for a privileged write."""
    occurred_at: datetime
    """Trusted time the facts were stated (the conversation's time, or now for a write)."""
    actor: str
    backend: str
    embedding_model: str
    now: datetime
    rows: dict[uuid.UUID, MemoryRow] = field(default_factory=dict)
    audit_extra: dict[str, Any] = field(default_factory=dict)
    """Added to the detail of every audit record this writer makes (e.g. a write's caller metadata)."""

    def apply(self, op: MemoryOp) -> MemoryRow:
        """Apply one decision; returns the memory that now carries the fact."""
        if op.action == "insert":
            return self._insert(op)
        if op.action == "refresh":
            return self._refresh(op)
        if op.action == "merge":
            return self._merge(op)
        if op.action in ("conflict", "supersede"):
            return self._contradict(op)
        raise ValueError(f"unknown op {op.action}")  # pragma: no cover - reconcile's OpAction is closed

    # -- helpers -------------------------------------------------------------------------------------------
    @property
    def _at(self) -> datetime:
        return min(self.occurred_at, self.now)

    def _audit(self, memory: MemoryRow, action: str, detail: dict[str, Any], **kw: Any) -> None:
        AuditRepository(self.session).add(
            memory_id=memory.id,
            namespace=memory.namespace,
            action=action,
            actor=self.actor,
            detail={**detail, **self.audit_extra},
            transcript_id=self.transcript_id,
            at=self.now,
            **kw,
        )
        log.info(
            f"memory.{action}",
            memory_id=str(memory.id),
            namespace=memory.namespace,
            key=memory.key,
            actor=self.actor,
            transcript_id=str(self.transcript_id) if self.transcript_id else None,
            **{k: v for k, v in detail.items() if k in ("reason", "confidence", "other_memory_id")},
        )

    def _provenance(self, memory_id: uuid.UUID, fact: CandidateFact, action: str) -> None:
        ProvenanceRepository(self.session).add(memory_id, self.transcript_id, list(fact.turn_ids), action)

    def _target(self, op: MemoryOp) -> MemoryRow:
        assert op.target_id is not None, f"{op.action} without target_id"
        row = self.rows.get(op.target_id)
        if row is None:
            row = MemoryRepository(self.session).get(self.namespace, op.target_id, for_update=True)
            if row is None:
                raise NotFound(f"reconcile targeted unknown memory {op.target_id}")
            self.rows[row.id] = row
        return row

    def _cap(self, fact: CandidateFact, confidence: float) -> float:
        return round(min(confidence, SOURCE_CONFIDENCE_CAP.get(fact.source, 1.0)), 4)

    # -- ops -----------------------------------------------------------------------------------------------
    def _insert(self, op: MemoryOp) -> MemoryRow:
        fact = op.fact
        at = self._at
        row = MemoryRow(
            id=op.new_id or uuid.uuid4(),
            namespace=self.namespace,
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
            also_slots=list(fact.also_slots),
            search_text=memory_search_text(fact.key, fact.value, fact.also_slots),
            search_vocab=SEARCH_VOCAB,
            backend=self.backend,
            embedding_model=self.embedding_model,
            created_at=at,
            updated_at=self.now,
            last_verified_at=at,
            state_changed_at=self.now,
        )
        MemoryRepository(self.session).add(row)
        # No flush here: the unit of work orders the inserts by their foreign keys (memory, then its provenance
        # and audit rows) and sends each table's rows of the transcript in one statement at the commit.
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

    def _refresh(self, op: MemoryOp) -> MemoryRow:
        row = self._target(op)
        before = row.state
        row.confidence = self._cap(op.fact, max(row.confidence, op.fact.confidence) + 0.05)
        self._reconfirm(row)
        self._provenance(row.id, op.fact, "refreshed")
        self._audit(
            row,
            "refreshed",
            {"confidence": row.confidence, "reason": op.reason, "candidate": op.fact.value},
            from_state=before,
            to_state=row.state,
        )
        return row

    def _reconfirm(self, row: MemoryRow) -> None:
        """A fact said again: the memory is verified as of this transcript, and a stale one revives."""
        row.last_verified_at = max(row.last_verified_at, self._at)
        row.updated_at = self.now
        if row.state == "stale":
            row.state = "active"
            row.state_changed_at = self.now

    def _merge(self, op: MemoryOp) -> MemoryRow:
        row = self._target(op)
        before_value, before_state = row.value, row.state
        row.value = op.merged_value or op.fact.value
        row.embedding = op.embedding
        row.also_slots = list(dict.fromkeys([*(row.also_slots or ()), *op.fact.also_slots]))[:4]
        row.search_text = memory_search_text(row.key, row.value, row.also_slots)
        row.search_vocab = SEARCH_VOCAB
        row.confidence = self._cap(op.fact, max(row.confidence, op.fact.confidence))
        self._reconfirm(row)
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
        return row

    def _contradict(self, op: MemoryOp) -> MemoryRow:
        target = self._target(op)
        inserted = self._insert(op)
        # Facts can arrive out of order (a retried transcript, a swept message): knowledge verified after
        # these facts were stated is the newer one, so the contradiction retires the incoming fact.
        late = target.last_verified_at > self._at
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
        self.session.flush()  # the conflict row is written by a statement of its own, after both memories
        ConflictRepository(self.session).add(
            ConflictRow(
                namespace=old.namespace,
                old_memory_id=old.id,
                new_memory_id=new.id,
                reason=op.reason or op.action,
                resolution="superseded" if supersede else "open",
                transcript_id=self.transcript_id,
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
        return inserted
