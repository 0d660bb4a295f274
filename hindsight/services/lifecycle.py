"""Beat's jobs: age memories (active -> stale -> archived, ttl expiry) and re-send stuck transcripts.

Each job runs in the caller's unit of work (one transaction: the Celery task or the CLI opens it) holding a
transaction-scoped advisory lock, and every transition is a compare-and-set on the row's state, so two beats
running by mistake still move each memory exactly once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog

from hindsight.config import LifecycleSettings, WorkerSettings
from hindsight.db.engine import Session
from hindsight.db.repositories import (
    AuditRepository,
    MemoryRepository,
    TranscriptRepository,
    try_advisory_xact_lock,
)
from pipeline.slots import slot_stale_windows

log = structlog.get_logger(__name__)
ACTOR = "lifecycle"


@dataclass
class LifecycleReport:
    skipped: bool = False
    """Another scheduler held the lifecycle lock; nothing was done by this call."""
    stale: int = 0
    archived: int = 0
    expired: int = 0
    moved: list[uuid.UUID] = field(default_factory=list)
    recomputed: int = 0
    """Memories whose due time changed because the windows did (settings or slot registry)."""


def lifecycle_windows(settings: LifecycleSettings) -> set[tuple[str, str, int | None, int | None]]:
    """The windows in force, as `lifecycle_windows` rows (scope, name, stale_days, archive_days): an active
    memory turns stale after its key attribute's window (the slot registry), else its kind's, else the default;
    a stale one is archived after its kind's archive window, else the default."""
    rows: set[tuple[str, str, int | None, int | None]] = {
        ("default", "", settings.default_stale_after_days, settings.default_archive_after_days)
    }
    for kind in set(settings.stale_after_days) | set(settings.archive_after_days):
        rows.add(("kind", kind, settings.stale_after_days.get(kind), settings.archive_after_days.get(kind)))
    rows |= {("key", attr, days, None) for attr, days in slot_stale_windows().items()}
    return rows


def run_lifecycle(session: Session, settings: LifecycleSettings, *, now: datetime | None = None) -> LifecycleReport:
    """Move every memory that is due, in batches of `settings.batch_size`; the lock holds until the commit.

    Each memory's next due time is stored (`lifecycle_due`, kept by a trigger on `memories` from
    `lifecycle_windows`), so a batch reads only due rows. The windows are written from `settings` and the slot
    registry first; when they changed, the due times they move are recomputed in the same transaction."""
    now = now or datetime.now(UTC)
    report = LifecycleReport()
    if not try_advisory_xact_lock(session, "lifecycle"):
        report.skipped = True
        return report
    memories = MemoryRepository(session)
    audit = AuditRepository(session)
    report.recomputed = memories.sync_lifecycle_windows(lifecycle_windows(settings))
    if report.recomputed:
        log.info("lifecycle.windows_changed", recomputed=report.recomputed)
    steps = (
        ("expired", lambda: memories.expire_ttl(now=now, limit=settings.batch_size), None, "archived"),
        (
            "stale",
            lambda: memories.transition_due(from_state="active", to_state="stale", now=now, limit=settings.batch_size),
            "active",
            "stale",
        ),
        (
            "archived",
            lambda: memories.transition_due(
                from_state="stale", to_state="archived", now=now, limit=settings.batch_size
            ),
            "stale",
            "archived",
        ),
    )
    for name, step, from_state, to_state in steps:
        while True:
            moved = step()
            # One multi-row INSERT for the batch's history (not an ORM object per row), one log line per batch:
            # the audit rows say which memory moved and why.
            audit.add_many(
                [
                    {
                        "memory_id": memory_id,
                        "namespace": namespace,
                        "action": "ttl_expired" if name == "expired" else "state_changed",
                        "actor": ACTOR,
                        "from_state": from_state,
                        "to_state": to_state,
                        "detail": {"reason": name, "kind": third} if name != "expired" else {"reason": "ttl_days"},
                        "created_at": now,
                    }
                    for memory_id, namespace, third in moved
                ]
            )
            if moved:
                log.info(
                    "memories.state_changed",
                    to_state=to_state,
                    reason=name,
                    count=len(moved),
                    namespaces=len({namespace for _, namespace, _ in moved}),
                )
            report.moved.extend(memory_id for memory_id, _, _ in moved)
            setattr(report, name, getattr(report, name) + len(moved))
            if len(moved) < settings.batch_size:
                break
    if report.moved:
        log.info("lifecycle.completed", stale=report.stale, archived=report.archived, expired=report.expired)
    return report


def sweep_stuck_transcripts(
    session: Session, settings: WorkerSettings, *, now: datetime | None = None, limit: int = 500
) -> list[uuid.UUID]:
    """Claim accepted/processing transcripts untouched for `sweep_after_seconds`; returns the ids to re-send
    once the caller's unit of work has committed the claim."""
    now = now or datetime.now(UTC)
    if not try_advisory_xact_lock(session, "sweeper"):
        return []
    ids = TranscriptRepository(session).claim_stuck(
        older_than=now - timedelta(seconds=settings.sweep_after_seconds), limit=limit, now=now
    )
    if ids:
        log.info("transcripts.swept", count=len(ids))
    return ids
