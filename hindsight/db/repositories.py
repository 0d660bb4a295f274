"""All SQL lives here. Repositories take a session and never commit."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CursorResult,
    Float,
    String,
    and_,
    cast,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import array as pg_array
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from hindsight.db.models import (
    AuditRow,
    ConflictRow,
    EpisodeRow,
    LifecycleDueRow,
    LifecycleWindowRow,
    MemoryRow,
    ProvenanceRow,
    RoundRow,
    TranscriptRow,
)
from hindsight.textsearch import search_text
from pipeline.rounds import Round


def advisory_xact_lock(session: Session, scope: str, key: str = "") -> None:
    """Block until this transaction holds the advisory lock for (scope, key)."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:s), hashtext(:k))"), {"s": scope, "k": key})


def try_advisory_xact_lock(session: Session, scope: str, key: str = "") -> bool:
    row = session.execute(
        text("SELECT pg_try_advisory_xact_lock(hashtext(:s), hashtext(:k))"), {"s": scope, "k": key}
    ).scalar_one()
    return bool(row)


def _rowcount(result: object) -> int:
    """How many rows a DML statement touched. `Session.execute` is typed to return `Result`, which has no
    `rowcount`; for INSERT/UPDATE/DELETE it is a `CursorResult`."""
    assert isinstance(result, CursorResult)
    return int(result.rowcount or 0)


def _delete_in_namespace(session: Session, model: Any, namespace: str, ids: Sequence[uuid.UUID]) -> int:
    """DELETE the rows of `model` with these ids in the namespace; how many went."""
    if not ids:
        return 0
    result = session.execute(
        delete(model)
        .where(model.namespace == namespace, model.id.in_(list(ids)))
        .execution_options(synchronize_session=False)
    )
    return _rowcount(result)


@dataclass
class TranscriptRepository:
    session: Session

    def insert_if_new(self, values: dict[str, Any]) -> tuple[uuid.UUID, bool]:
        """Insert unless (namespace, idempotency_key) exists. Returns (id, created)."""
        stmt = (
            pg_insert(TranscriptRow)
            .values(**values)
            .on_conflict_do_nothing(constraint="uq_transcripts_namespace_idempotency_key")
            .returning(TranscriptRow.id)
        )
        new_id = self.session.execute(stmt).scalar_one_or_none()
        if new_id is not None:
            return new_id, True
        existing = self.session.execute(
            select(TranscriptRow.id).where(
                TranscriptRow.namespace == values["namespace"],
                TranscriptRow.idempotency_key == values["idempotency_key"],
            )
        ).scalar_one()
        return existing, False

    def get(self, transcript_id: uuid.UUID, *, for_update: bool = False) -> TranscriptRow | None:
        stmt = select(TranscriptRow).where(TranscriptRow.id == transcript_id)
        if for_update:
            stmt = stmt.with_for_update()
        return self.session.execute(stmt).scalar_one_or_none()

    def get_in_namespace(self, namespace: str, transcript_id: uuid.UUID) -> TranscriptRow | None:
        return self.session.execute(
            select(TranscriptRow).where(TranscriptRow.id == transcript_id, TranscriptRow.namespace == namespace)
        ).scalar_one_or_none()

    def lock_many(self, namespace: str, ids: Sequence[uuid.UUID]) -> list[TranscriptRow]:
        if not ids:
            return []
        return list(
            self.session.execute(
                select(TranscriptRow)
                .where(TranscriptRow.namespace == namespace, TranscriptRow.id.in_(list(ids)))
                .order_by(TranscriptRow.id)
                .with_for_update()
            ).scalars()
        )

    def mark_enqueued(self, ids: Sequence[uuid.UUID], now: datetime) -> None:
        if ids:
            self.session.execute(update(TranscriptRow).where(TranscriptRow.id.in_(ids)).values(enqueued_at=now))

    def claim_stuck(self, *, older_than: datetime, limit: int, now: datetime) -> list[uuid.UUID]:
        """Unfinished transcripts nobody has touched since `older_than`, claimed with SKIP LOCKED."""
        stuck = (
            select(TranscriptRow.id)
            .where(
                TranscriptRow.state.in_(("accepted", "processing")),
                TranscriptRow.updated_at < older_than,
                or_(TranscriptRow.enqueued_at.is_(None), TranscriptRow.enqueued_at < older_than),
            )
            .order_by(TranscriptRow.updated_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        ids = list(self.session.execute(stuck).scalars())
        self.mark_enqueued(ids, now)
        return ids

    def list_dead(self, namespace: str | None = None, limit: int = 100) -> list[TranscriptRow]:
        stmt = select(TranscriptRow).where(TranscriptRow.state == "dead")
        if namespace:
            stmt = stmt.where(TranscriptRow.namespace == namespace)
        return list(self.session.execute(stmt.order_by(TranscriptRow.updated_at).limit(limit)).scalars())

    def lock_dead(self, ids: Sequence[uuid.UUID] | None = None, namespace: str | None = None) -> list[TranscriptRow]:
        """Lock the dead-lettered transcripts, all of them or those with these ids, optionally in one namespace."""
        stmt = select(TranscriptRow).where(TranscriptRow.state == "dead").with_for_update()
        if ids is not None:
            stmt = stmt.where(TranscriptRow.id.in_(list(ids)))
        if namespace:
            stmt = stmt.where(TranscriptRow.namespace == namespace)
        return list(self.session.execute(stmt).scalars())

    def count_finished(self, ids: Sequence[uuid.UUID]) -> int:
        """How many of these transcripts are finished: distilled (`done`) or given up on (`dead`)."""
        if not ids:
            return 0
        stmt = select(func.count()).where(TranscriptRow.id.in_(list(ids)), TranscriptRow.state.in_(("done", "dead")))
        return int(self.session.execute(stmt).scalar_one())

    def lock_mentioning(self, namespace: str, lowered: Sequence[str]) -> list[TranscriptRow]:
        """Erase support: the namespace's transcripts whose turns contain one of `lowered` (lower-case)."""
        if not lowered:
            return []
        text_of = func.lower(cast(TranscriptRow.turns, String))
        return list(
            self.session.execute(
                select(TranscriptRow)
                .where(
                    TranscriptRow.namespace == namespace, or_(*[func.strpos(text_of, _jsonish(n)) > 0 for n in lowered])
                )
                .order_by(TranscriptRow.id)
                .with_for_update()
            ).scalars()
        )

    def lock_namespace_rows(self, namespace: str) -> list[uuid.UUID]:
        """Lock every transcript of the namespace (in id order, as a worker locks one before the namespace)."""
        stmt = select(TranscriptRow.id).where(TranscriptRow.namespace == namespace).order_by(TranscriptRow.id)
        return list(self.session.execute(stmt.with_for_update()).scalars())

    def delete_many(self, namespace: str, ids: Sequence[uuid.UUID]) -> int:
        """Delete transcripts; their episodes go with them (ON DELETE CASCADE)."""
        return _delete_in_namespace(self.session, TranscriptRow, namespace, ids)

    def done_without_rounds(self, after: uuid.UUID, limit: int) -> list[TranscriptRow]:
        """Up to `limit` distilled transcripts with no rounds, by id after `after` (a keyset page, any namespace)."""
        return list(
            self.session.execute(
                select(TranscriptRow)
                .where(
                    TranscriptRow.id > after,
                    TranscriptRow.state == "done",
                    ~exists().where(RoundRow.transcript_id == TranscriptRow.id),
                )
                .order_by(TranscriptRow.id)
                .limit(limit)
            ).scalars()
        )


@dataclass
class EpisodeRepository:
    session: Session

    def add(self, row: EpisodeRow) -> None:
        self.session.add(row)

    def exists_for(self, transcript_id: uuid.UUID) -> bool:
        return (
            self.session.execute(select(EpisodeRow.id).where(EpisodeRow.transcript_id == transcript_id)).first()
            is not None
        )

    def for_transcripts(self, namespace: str, transcript_ids: Sequence[uuid.UUID]) -> list[EpisodeRow]:
        if not transcript_ids:
            return []
        return list(
            self.session.execute(
                select(EpisodeRow)
                .where(EpisodeRow.namespace == namespace, EpisodeRow.transcript_id.in_(list(transcript_ids)))
                .with_for_update()
            ).scalars()
        )

    def page(self, namespace: str, limit: int, offset: int) -> list[EpisodeRow]:
        return list(
            self.session.execute(
                select(EpisodeRow)
                .where(EpisodeRow.namespace == namespace)
                .order_by(EpisodeRow.occurred_at.desc())
                .limit(limit)
                .offset(offset)
            ).scalars()
        )

    def lock_mentioning(self, namespace: str, lowered: Sequence[str]) -> list[EpisodeRow]:
        """Erase support: the namespace's episodes whose summary, entities or search text contain one of
        `lowered` (lower-case)."""
        if not lowered:
            return []
        text_of = func.lower(
            EpisodeRow.summary + " " + cast(EpisodeRow.entities, String) + " " + EpisodeRow.search_text
        )
        return list(
            self.session.execute(
                select(EpisodeRow)
                .where(
                    EpisodeRow.namespace == namespace,
                    # The summary is plain text, the entities JSON: look for both spellings of a needle.
                    or_(*[func.strpos(text_of, form) > 0 for n in lowered for form in {n, _jsonish(n)}]),
                )
                .with_for_update()
            ).scalars()
        )

    def backends_in(self, namespaces: Sequence[str]) -> list[str]:
        """The distinct back-ends that produced these namespaces' episodes, sorted."""
        if not namespaces:
            return []
        stmt = select(EpisodeRow.backend).where(EpisodeRow.namespace.in_(list(namespaces))).distinct()
        return sorted(self.session.execute(stmt).scalars())

    def count_for_transcripts(self, namespace: str, transcript_ids: Sequence[uuid.UUID]) -> int:
        if not transcript_ids:
            return 0
        stmt = select(func.count()).where(
            EpisodeRow.namespace == namespace, EpisodeRow.transcript_id.in_(list(transcript_ids))
        )
        return int(self.session.execute(stmt).scalar_one())


@dataclass
class RoundRepository:
    """Rounds (pipeline.rounds): written with their transcript's distillation, erased with their turns."""

    session: Session

    def add(
        self,
        namespace: str,
        transcript_id: uuid.UUID,
        occurred_at: datetime,
        rounds: Sequence[Round],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        """Store a transcript's rounds with their embeddings in one statement; rounds it already has are left
        as they are (unique transcript and position), so distillation and the backfill may both run."""
        if not rounds:
            return
        values = [
            {
                "id": uuid.uuid4(),
                "namespace": namespace,
                "transcript_id": transcript_id,
                "seq": r.seq,
                "turn_ids": r.turn_ids,
                "text": r.text,
                "embedding": list(v),
                "search_text": search_text(r.key),
                "occurred_at": occurred_at,
            }
            for r, v in zip(rounds, vectors, strict=True)
        ]
        self.session.execute(
            pg_insert(RoundRow).values(values).on_conflict_do_nothing(index_elements=["transcript_id", "seq"])
        )

    def exists_for(self, transcript_id: uuid.UUID) -> bool:
        return (
            self.session.execute(select(RoundRow.id).where(RoundRow.transcript_id == transcript_id)).first() is not None
        )

    def showing(self, namespace: str, turns: dict[uuid.UUID, set[str]]) -> list[RoundRow]:
        """The rounds of `namespace` that show one of `turns` (transcript id -> turn ids), oldest first."""
        conds = [
            and_(RoundRow.transcript_id == tid, RoundRow.turn_ids.has_any(pg_array(sorted(ids))))
            for tid, ids in turns.items()
            if ids
        ]
        if not conds:
            return []
        stmt = (
            select(RoundRow)
            .where(RoundRow.namespace == namespace, or_(*conds))
            .order_by(RoundRow.occurred_at, RoundRow.seq)
        )
        return list(self.session.execute(stmt).scalars())

    def delete_covering(self, namespace: str, turns: dict[uuid.UUID, set[str]]) -> int:
        """Erase support: delete the rounds of `namespace` that show one of `turns` (transcript id -> turn ids);
        returns how many."""
        gone = 0
        for tid, ids in turns.items():
            if not ids:
                continue
            result = self.session.execute(
                delete(RoundRow).where(
                    RoundRow.namespace == namespace,
                    RoundRow.transcript_id == tid,
                    RoundRow.turn_ids.has_any(pg_array(sorted(ids))),
                )
            )
            gone += _rowcount(result)
        return gone

    def delete_mentioning(self, namespace: str, lowered: Sequence[str]) -> int:
        """Erase support: delete the rounds of `namespace` whose text or search key contains one of `lowered`
        (lower-case); returns how many."""
        if not lowered:
            return 0
        text_of = func.lower(RoundRow.text + " " + RoundRow.search_text)
        result = self.session.execute(
            delete(RoundRow).where(
                RoundRow.namespace == namespace, or_(*[func.strpos(text_of, n) > 0 for n in lowered])
            )
        )
        return _rowcount(result)

    def count(self, namespace: str) -> int:
        return int(self.session.execute(select(func.count()).where(RoundRow.namespace == namespace)).scalar_one())

    def count_for_transcripts(self, namespace: str, transcript_ids: Sequence[uuid.UUID]) -> int:
        if not transcript_ids:
            return 0
        stmt = select(func.count()).where(
            RoundRow.namespace == namespace, RoundRow.transcript_id.in_(list(transcript_ids))
        )
        return int(self.session.execute(stmt).scalar_one())


@dataclass
class MemoryRepository:
    session: Session

    def get(self, namespace: str, memory_id: uuid.UUID, *, for_update: bool = False) -> MemoryRow | None:
        stmt = select(MemoryRow).where(MemoryRow.id == memory_id, MemoryRow.namespace == namespace)
        if for_update:
            stmt = stmt.with_for_update()
        return self.session.execute(stmt).scalar_one_or_none()

    def get_many(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MemoryRow]:
        if not ids:
            return {}
        rows = self.session.execute(select(MemoryRow).where(MemoryRow.id.in_(ids))).scalars()
        return {r.id: r for r in rows}

    def add(self, row: MemoryRow) -> None:
        self.session.add(row)

    def page(
        self,
        namespace: str,
        *,
        states: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[MemoryRow], int]:
        cond = [MemoryRow.namespace == namespace]
        if states:
            cond.append(MemoryRow.state.in_(states))
        if kinds:
            cond.append(MemoryRow.kind.in_(kinds))
        total = self.session.execute(select(func.count()).select_from(MemoryRow).where(*cond)).scalar_one()
        rows = self.session.execute(
            select(MemoryRow)
            .where(*cond)
            .order_by(MemoryRow.updated_at.desc(), MemoryRow.id)
            .limit(limit)
            .offset(offset)
        ).scalars()
        return list(rows), int(total)

    def candidates_for_reconcile(
        self, namespace: str, keys: Sequence[str], embeddings: Sequence[list[float]], k: int
    ) -> list[MemoryRow]:
        """Memories sharing a key with the new facts, plus the k nearest of each new fact.

        The distance is wrapped (`+ 0`) so PostgreSQL scans the namespace exactly instead of using the HNSW
        index, which (pgvector 0.6) filters by namespace only after its scan and can miss neighbours.
        """
        live = ("active", "stale", "quarantined")
        found: dict[uuid.UUID, MemoryRow] = {}
        if keys:
            for row in self.session.execute(
                select(MemoryRow).where(
                    MemoryRow.namespace == namespace,
                    MemoryRow.state.in_(live),
                    MemoryRow.key.in_(list(keys)),
                )
            ).scalars():
                found[row.id] = row
        for emb in embeddings:
            dist = MemoryRow.embedding.cosine_distance(emb) + literal(0.0, Float)
            for row in self.session.execute(
                select(MemoryRow)
                .where(MemoryRow.namespace == namespace, MemoryRow.state.in_(live))
                .order_by(dist)
                .limit(k)
            ).scalars():
                found[row.id] = row
        return list(found.values())

    def vector_search(
        self, namespace: str, embedding: list[float], *, states: Sequence[str], limit: int
    ) -> list[tuple[MemoryRow, float]]:
        dist = MemoryRow.embedding.cosine_distance(embedding) + literal(0.0, Float)
        rows = self.session.execute(
            select(MemoryRow, (1 - dist).label("score"))
            .where(MemoryRow.namespace == namespace, MemoryRow.state.in_(list(states)))
            .order_by(dist)
            .limit(limit)
        ).all()
        return [(row, float(score)) for row, score in rows]

    def ids_for_subject(
        self, namespace: str, *, key_prefix: str | None = None, subject: str | None = None
    ) -> list[uuid.UUID]:
        """Every memory (any state) of the namespace whose key starts with `key_prefix` or whose subject is
        `subject`."""
        cond: list[ColumnElement[bool]] = []
        if key_prefix:
            escaped = key_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            cond.append(MemoryRow.key.like(escaped + "%", escape="\\"))
        if subject:
            cond.append(MemoryRow.subject == subject)
        if not cond:
            return []
        stmt = select(MemoryRow.id).where(MemoryRow.namespace == namespace, or_(*cond)).with_for_update()
        return list(self.session.execute(stmt).scalars())

    def ids_in_namespace(self, namespace: str) -> list[uuid.UUID]:
        """Every memory of the namespace, any state (erase of a whole namespace)."""
        stmt = select(MemoryRow.id).where(MemoryRow.namespace == namespace).order_by(MemoryRow.id)
        return list(self.session.execute(stmt).scalars())

    def lock_many(self, namespace: str, ids: Sequence[uuid.UUID]) -> list[MemoryRow]:
        if not ids:
            return []
        stmt = (
            select(MemoryRow)
            .where(MemoryRow.namespace == namespace, MemoryRow.id.in_(list(ids)))
            .order_by(MemoryRow.id)
            .with_for_update()
        )
        return list(self.session.execute(stmt).scalars())

    def delete_many(self, namespace: str, ids: Sequence[uuid.UUID]) -> int:
        """Delete the rows (their provenance and conflicts go with them: ON DELETE CASCADE)."""
        return _delete_in_namespace(self.session, MemoryRow, namespace, ids)

    def sync_lifecycle_windows(self, windows: set[tuple[str, str, int | None, int | None]]) -> int:
        """Make `lifecycle_windows` hold exactly `windows` ((scope, name, stale_days, archive_days) rows). When
        that changes anything, every memory's due time is recomputed, and only those that move are written.
        Returns how many were written; 0 when the windows were already these."""
        held = {
            (r.scope, r.name, r.stale_days, r.archive_days)
            for r in self.session.execute(select(LifecycleWindowRow)).scalars()
        }
        if held == windows:
            return 0
        self.session.execute(delete(LifecycleWindowRow))
        if windows:
            self.session.execute(
                pg_insert(LifecycleWindowRow),
                [{"scope": s, "name": n, "stale_days": sd, "archive_days": ad} for s, n, sd, ad in sorted(windows)],
            )
        due = func.memory_due_at(
            MemoryRow.kind,
            MemoryRow.key,
            MemoryRow.state,
            MemoryRow.pinned,
            MemoryRow.last_verified_at,
            MemoryRow.state_changed_at,
        )
        gone = self.session.execute(
            delete(LifecycleDueRow)
            .where(LifecycleDueRow.memory_id == MemoryRow.id, due.is_(None))
            .execution_options(synchronize_session=False)
        )
        fresh = pg_insert(LifecycleDueRow).from_select(
            ["memory_id", "state", "due_at"],
            select(MemoryRow.id, MemoryRow.state, due).where(
                MemoryRow.state.in_(("active", "stale")), due.is_not(None)
            ),
        )
        upserted = self.session.execute(
            fresh.on_conflict_do_update(
                index_elements=[LifecycleDueRow.memory_id],
                set_={"state": fresh.excluded.state, "due_at": fresh.excluded.due_at},
                where=or_(
                    LifecycleDueRow.due_at.is_distinct_from(fresh.excluded.due_at),
                    LifecycleDueRow.state.is_distinct_from(fresh.excluded.state),
                ),
            ).returning(LifecycleDueRow.memory_id)
        ).all()
        return _rowcount(gone) + len(upserted)

    def transition_due(
        self, *, from_state: str, to_state: str, now: datetime, limit: int
    ) -> list[tuple[uuid.UUID, str, str]]:
        """Compare-and-set `from_state` -> `to_state` for up to `limit` unpinned memories whose due time
        (`lifecycle_due`, kept by a trigger from `lifecycle_windows`) has come, the longest due first. Its index on
        (state, due_at) finds them: the cost follows the rows that are due, not the size of the table.

        Returns (id, namespace, kind) of the rows this call moved; a concurrent caller moving the same row
        finds it no longer in `from_state` and skips it (SKIP LOCKED + the WHERE on state).
        """
        due = (
            select(LifecycleDueRow.memory_id)
            .where(LifecycleDueRow.state == from_state, LifecycleDueRow.due_at <= now)
            .order_by(LifecycleDueRow.due_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = self.session.execute(
            update(MemoryRow)
            .where(
                MemoryRow.id.in_(due.scalar_subquery()),
                MemoryRow.state == from_state,
                MemoryRow.pinned.is_(False),
            )
            .values(state=to_state, state_changed_at=now, updated_at=now)
            .returning(MemoryRow.id, MemoryRow.namespace, MemoryRow.kind)
            .execution_options(synchronize_session=False)
        ).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def expire_ttl(self, *, now: datetime, limit: int) -> list[tuple[uuid.UUID, str, str]]:
        """Archive unpinned memories whose ttl_days ran out since their last verification."""
        due = (
            select(MemoryRow.id)
            .where(
                MemoryRow.ttl_days.is_not(None),
                MemoryRow.pinned.is_(False),
                MemoryRow.state.in_(("active", "stale")),
                MemoryRow.last_verified_at < literal(now) - func.make_interval(0, 0, 0, MemoryRow.ttl_days),
            )
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = self.session.execute(
            update(MemoryRow)
            .where(MemoryRow.id.in_(due.scalar_subquery()), MemoryRow.state.in_(("active", "stale")))
            .values(state="archived", state_changed_at=now, updated_at=now)
            .returning(MemoryRow.id, MemoryRow.namespace, cast(MemoryRow.state, String))
            .execution_options(synchronize_session=False)
        ).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def lock_outdated_search_text(self, version: str, limit: int) -> list[tuple[uuid.UUID, str, str, list[str]]]:
        """Up to `limit` memories (any namespace) whose search text another vocabulary version built, by id,
        locked (rows another transaction holds are skipped): (id, key, value, also_slots)."""
        rows = self.session.execute(
            select(MemoryRow.id, MemoryRow.key, MemoryRow.value, MemoryRow.also_slots)
            .where(_outdated_vocab(version))
            .order_by(MemoryRow.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        return [(r.id, r.key, r.value, list(r.also_slots or ())) for r in rows]

    def set_search_text(self, memory_id: uuid.UUID, search_text: str, version: str) -> None:
        """Store a rebuilt search text, unless a writer rebuilt the row with `version` meanwhile."""
        self.session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == memory_id, _outdated_vocab(version))
            .values(search_text=search_text, search_vocab=version)
            .execution_options(synchronize_session=False)
        )


def _outdated_vocab(version: str) -> ColumnElement[bool]:
    # Two ranges and a NULL test instead of `IS DISTINCT FROM`: each is a range of the (search_vocab, id)
    # index, so finding that nothing is left costs a few index pages, not a scan of the table.
    v = MemoryRow.search_vocab
    return or_(v.is_(None), v < version, v > version)


@dataclass
class AuditRepository:
    session: Session

    def add(
        self,
        *,
        memory_id: uuid.UUID,
        namespace: str,
        action: str,
        actor: str,
        from_state: str | None = None,
        to_state: str | None = None,
        detail: dict[str, Any] | None = None,
        transcript_id: uuid.UUID | None = None,
        at: datetime | None = None,
    ) -> None:
        row = AuditRow(
            memory_id=memory_id,
            namespace=namespace,
            action=action,
            actor=actor,
            from_state=from_state,
            to_state=to_state,
            detail=detail or {},
            transcript_id=transcript_id,
        )
        if at is not None:
            row.created_at = at
        self.session.add(row)

    def add_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append many history rows in one multi-row INSERT (each a dict of `AuditRow` columns; `created_at`
        required). A batch job's history without an ORM object per row."""
        if rows:
            self.session.execute(
                insert(AuditRow), [{"transcript_id": None, "from_state": None, "to_state": None, **r} for r in rows]
            )

    def last(self, memory_id: uuid.UUID, action: str) -> AuditRow | None:
        return self.session.execute(
            select(AuditRow)
            .where(AuditRow.memory_id == memory_id, AuditRow.action == action)
            .order_by(AuditRow.id.desc())
            .limit(1)
        ).scalar_one_or_none()

    def scrub(self, namespace: str, memory_ids: Sequence[uuid.UUID], needles: Sequence[str]) -> int:
        """Erase support: drop the detail of the erased memories' history and cut `needles` out of the rest
        of the namespace's history. The only rewrite the append-only trigger allows, and only inside this
        transaction (SET LOCAL)."""
        self.session.execute(text("SET LOCAL hindsight.audit_rewrite = 'on'"))
        count = 0
        if memory_ids:
            result = self.session.execute(
                update(AuditRow)
                .where(AuditRow.namespace == namespace, AuditRow.memory_id.in_(list(memory_ids)))
                .values(detail={"erased": True})
                .execution_options(synchronize_session=False)
            )
            count += _rowcount(result)
        if needles:
            # jsonb's text form escapes like JSON (quotes, backslashes, newlines), so look for the escaped form.
            escaped = [json.dumps(n, ensure_ascii=False)[1:-1] for n in needles]
            rows = self.session.execute(
                select(AuditRow).where(
                    AuditRow.namespace == namespace,
                    or_(*[func.strpos(cast(AuditRow.detail, String), n) > 0 for n in escaped]),
                )
            ).scalars()
            for row in rows:
                row.detail = scrub_json(row.detail, needles)
                count += 1
        return count

    def scrub_namespace(self, namespace: str) -> int:
        """Erase of a whole namespace: every audit record keeps its action, states, actor and time, never its
        detail. Same SET LOCAL permission as `scrub`."""
        self.session.execute(text("SET LOCAL hindsight.audit_rewrite = 'on'"))
        result = self.session.execute(
            update(AuditRow)
            .where(AuditRow.namespace == namespace)
            .values(detail={"erased": True})
            .execution_options(synchronize_session=False)
        )
        return _rowcount(result)

    def history(self, memory_id: uuid.UUID) -> list[AuditRow]:
        return list(
            self.session.execute(
                select(AuditRow).where(AuditRow.memory_id == memory_id).order_by(AuditRow.id)
            ).scalars()
        )


@dataclass
class ProvenanceRepository:
    session: Session

    def add(self, memory_id: uuid.UUID, transcript_id: uuid.UUID | None, turn_ids: list[str], action: str) -> None:
        self.session.add(
            ProvenanceRow(memory_id=memory_id, transcript_id=transcript_id, turn_ids=turn_ids, action=action)
        )

    def for_memories(self, memory_ids: Sequence[uuid.UUID]) -> list[ProvenanceRow]:
        if not memory_ids:
            return []
        return list(
            self.session.execute(
                select(ProvenanceRow).where(ProvenanceRow.memory_id.in_(list(memory_ids))).order_by(ProvenanceRow.id)
            ).scalars()
        )

    def for_memory(self, memory_id: uuid.UUID) -> list[ProvenanceRow]:
        return list(
            self.session.execute(
                select(ProvenanceRow).where(ProvenanceRow.memory_id == memory_id).order_by(ProvenanceRow.id)
            ).scalars()
        )

    def for_transcript(self, transcript_id: uuid.UUID) -> list[ProvenanceRow]:
        return list(
            self.session.execute(
                select(ProvenanceRow).where(ProvenanceRow.transcript_id == transcript_id).order_by(ProvenanceRow.id)
            ).scalars()
        )

    def facts_of_transcripts(
        self, transcript_ids: Sequence[uuid.UUID]
    ) -> list[tuple[uuid.UUID | None, list[str], str]]:
        """(transcript id, turn ids, memory value) of every memory these transcripts' turns gave, quarantined ones
        left out (distillation leaves them out of the rounds' keys too)."""
        rows = self.session.execute(
            select(ProvenanceRow.transcript_id, ProvenanceRow.turn_ids, MemoryRow.value)
            .join(MemoryRow, MemoryRow.id == ProvenanceRow.memory_id)
            .where(ProvenanceRow.transcript_id.in_(list(transcript_ids)), MemoryRow.state != "quarantined")
        ).all()
        return [(r[0], list(r[1]), r[2]) for r in rows]

    def delete_for_transcript(self, transcript_id: uuid.UUID) -> int:
        result = self.session.execute(
            delete(ProvenanceRow)
            .where(ProvenanceRow.transcript_id == transcript_id)
            .execution_options(synchronize_session=False)
        )
        return _rowcount(result)


@dataclass
class ConflictRepository:
    session: Session

    def add(self, row: ConflictRow) -> None:
        self.session.add(row)

    def for_memory(self, memory_id: uuid.UUID) -> list[ConflictRow]:
        return list(
            self.session.execute(
                select(ConflictRow)
                .where(or_(ConflictRow.old_memory_id == memory_id, ConflictRow.new_memory_id == memory_id))
                .order_by(ConflictRow.created_at)
            ).scalars()
        )

    def in_namespace(self, namespace: str) -> list[ConflictRow]:
        return list(
            self.session.execute(
                select(ConflictRow).where(ConflictRow.namespace == namespace).order_by(ConflictRow.created_at)
            ).scalars()
        )


@dataclass
class TombstoneRepository:
    """What is left of an erased memory: its id, namespace, when and by whom; never content."""

    session: Session

    def add(self, *, memory_id: uuid.UUID, namespace: str, erase_id: uuid.UUID, scope: str, actor: str) -> None:
        self.session.execute(
            text(
                "INSERT INTO memory_tombstones (memory_id, namespace, erase_id, scope, actor) "
                "VALUES (:m, :n, :e, :s, :a)"
            ),
            {"m": memory_id, "n": namespace, "e": erase_id, "s": scope, "a": actor},
        )

    def exists(self, namespace: str, memory_id: uuid.UUID) -> bool:
        return (
            self.session.execute(
                text("SELECT 1 FROM memory_tombstones WHERE namespace = :n AND memory_id = :m LIMIT 1"),
                {"n": namespace, "m": memory_id},
            ).first()
            is not None
        )


def _jsonish(needle: str) -> str:
    """A needle as it appears in jsonb's text form (escaped like JSON: quotes, backslashes, newlines)."""
    return json.dumps(needle, ensure_ascii=False)[1:-1]


def scrub_json(value: Any, needles: Sequence[str], replacement: str = "[erased]") -> Any:
    """`value` with every occurrence of each needle in its strings (keys included) replaced."""
    if isinstance(value, str):
        for n in needles:
            if n:
                value = value.replace(n, replacement)
        return value
    if isinstance(value, list):
        return [scrub_json(v, needles, replacement) for v in value]
    if isinstance(value, dict):
        return {scrub_json(k, needles, replacement): scrub_json(v, needles, replacement) for k, v in value.items()}
    return value


__all__ = [
    "AuditRepository",
    "ConflictRepository",
    "EpisodeRepository",
    "MemoryRepository",
    "ProvenanceRepository",
    "TombstoneRepository",
    "TranscriptRepository",
    "advisory_xact_lock",
    "try_advisory_xact_lock",
]
