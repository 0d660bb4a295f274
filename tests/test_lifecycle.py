"""Lifecycle transitions on the real database: windows per kind, ttl, pinning, and exactly-once under
concurrent schedulers. The lifecycle ages every memory of the table, so each test has a database of its own
(`own_engine`) and its reports count its own rows only."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hindsight.config import LifecycleSettings
from hindsight.db.engine import session_scope
from hindsight.services.lifecycle import LifecycleReport, run_lifecycle
from tests.factories import create_memory

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _age(engine: sa.Engine, settings: LifecycleSettings, *, now: datetime) -> LifecycleReport:
    """One lifecycle run in its own unit of work, as the beat task opens it."""
    with session_scope(engine) as session:
        return run_lifecycle(session, settings, now=now)


def _state(engine: sa.Engine, mid: object) -> str:
    with engine.connect() as conn:
        return str(conn.execute(sa.text("SELECT state FROM memories WHERE id=:i"), {"i": mid}).scalar_one())


def _audits(engine: sa.Engine, mid: object) -> list[tuple[str, str | None, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT action, from_state, to_state FROM memory_audit WHERE memory_id=:i ORDER BY id"),
            {"i": mid},
        ).all()
    return [(r[0], r[1], r[2]) for r in rows]


def test_per_kind_windows_pinning_and_archive(own_engine: sa.Engine, namespace: str) -> None:
    settings = LifecycleSettings(stale_after_days={"project": 21, "preference": 90}, default_archive_after_days=30)
    old = NOW - timedelta(days=40)
    project = create_memory(own_engine, namespace, kind="project", at=old)
    preference = create_memory(own_engine, namespace, kind="preference", at=old)
    pinned = create_memory(own_engine, namespace, kind="project", at=old, pinned=True)

    first = _age(own_engine, settings, now=NOW)
    assert (first.stale, first.archived, first.expired, first.moved) == (1, 0, 0, [project])
    assert _state(own_engine, project) == "stale"  # 40 days > project's 21
    assert _state(own_engine, preference) == "active"  # 40 days < preference's 90
    assert _state(own_engine, pinned) == "active"
    assert _audits(own_engine, project) == [("state_changed", "active", "stale")]

    second = _age(own_engine, settings, now=NOW + timedelta(days=31))
    assert (second.stale, second.archived, second.expired, second.moved) == (0, 1, 0, [project])
    assert _state(own_engine, project) == "archived"
    assert _audits(own_engine, project)[-1] == ("state_changed", "stale", "archived")
    assert _state(own_engine, pinned) == "active"


def test_ttl_expiry_archives_unpinned_memories(own_engine: sa.Engine, namespace: str) -> None:
    expiring = create_memory(own_engine, namespace, kind="fact", ttl_days=7, at=NOW - timedelta(days=8))
    fresh = create_memory(own_engine, namespace, kind="fact", ttl_days=7, at=NOW - timedelta(days=6))
    pinned = create_memory(own_engine, namespace, kind="fact", ttl_days=7, pinned=True, at=NOW - timedelta(days=8))
    report = _age(own_engine, LifecycleSettings(), now=NOW)
    assert (report.expired, report.stale, report.moved) == (1, 0, [expiring])
    assert _state(own_engine, expiring) == "archived"
    assert _audits(own_engine, expiring) == [("ttl_expired", None, "archived")]
    assert _state(own_engine, fresh) == "active"
    assert _state(own_engine, pinned) == "active"


def test_two_schedulers_at_once_move_each_memory_exactly_once(own_engine: sa.Engine, namespace: str) -> None:
    settings = LifecycleSettings(stale_after_days={"project": 1}, batch_size=7)
    ids = [create_memory(own_engine, namespace, kind="project", at=NOW - timedelta(days=5)) for _ in range(40)]
    barrier = threading.Barrier(4)
    reports: list[LifecycleReport] = []

    def run() -> None:
        barrier.wait()
        reports.append(_age(own_engine, settings, now=NOW))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(_state(own_engine, i) == "stale" for i in ids)
    assert all(len(_audits(own_engine, i)) == 1 for i in ids)
    moved = [m for r in reports for m in r.moved]
    assert sorted(moved) == sorted(ids), "each memory moved by exactly one scheduler"


def _due(engine: sa.Engine, mid: object) -> datetime | None:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT due_at FROM lifecycle_due WHERE memory_id=:i"), {"i": mid}
        ).scalar_one_or_none()


def test_the_due_time_follows_every_write(own_engine: sa.Engine, namespace: str) -> None:
    """The stored due time (what the lifecycle's index reads) is kept by the database on every write path: a
    plain INSERT, an UPDATE of the clock, pinning, and the lifecycle's own move to `stale`."""
    settings = LifecycleSettings()  # the defaults: project 21 days, deadline slots 14, archive after 90
    _age(own_engine, settings, now=NOW)  # writes the windows in force
    at = NOW - timedelta(days=40)
    project = create_memory(own_engine, namespace, kind="project", at=at)
    deadline = create_memory(own_engine, namespace, kind="project", key="user.deadline", at=at)
    assert _due(own_engine, project) == at + timedelta(days=21)
    assert _due(own_engine, deadline) == at + timedelta(days=14), "a slot's own window comes before its kind's"

    with own_engine.begin() as conn:
        conn.execute(sa.text("UPDATE memories SET pinned = true WHERE id = :i"), {"i": project})
    assert _due(own_engine, project) is None, "a pinned memory is never due"
    with own_engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE memories SET pinned = false, last_verified_at = :t WHERE id = :i"), {"i": project, "t": NOW}
        )
    assert _due(own_engine, project) == NOW + timedelta(days=21), "re-confirmation restarts the window"

    report = _age(own_engine, settings, now=NOW)
    assert report.moved == [deadline]
    assert _due(own_engine, deadline) == NOW + timedelta(days=settings.default_archive_after_days)
    _age(own_engine, settings, now=NOW + timedelta(days=settings.default_archive_after_days + 1))
    assert _state(own_engine, deadline) == "archived"
    assert _due(own_engine, deadline) is None


def test_changed_windows_recompute_only_the_rows_they_move(own_engine: sa.Engine, namespace: str) -> None:
    settings = LifecycleSettings()
    _age(own_engine, settings, now=NOW)
    at = NOW - timedelta(days=10)
    project = create_memory(own_engine, namespace, kind="project", at=at)
    others = [create_memory(own_engine, namespace, kind=k, at=at) for k in ("fact", "preference", "habit")]
    before = {m: _due(own_engine, m) for m in others}

    shorter = LifecycleSettings(stale_after_days={**settings.stale_after_days, "project": 5})
    report = _age(own_engine, shorter, now=NOW)
    assert report.recomputed == 1, "only the project memory's window changed"
    assert report.moved == [project], "10 days > the new 5-day window: due at once"
    assert {m: _due(own_engine, m) for m in others} == before

    again = _age(own_engine, shorter, now=NOW)
    assert (again.recomputed, again.moved) == (0, [])


def test_a_zero_day_window_moves_at_once(own_engine: sa.Engine, namespace: str) -> None:
    """0 days is a window too: archive what turns stale in the same run (the fault suite's setting)."""
    settings = LifecycleSettings(default_archive_after_days=0)
    old = create_memory(own_engine, namespace, kind="project", at=NOW - timedelta(days=40))
    report = _age(own_engine, settings, now=NOW)
    assert (report.stale, report.archived) == (1, 1)
    assert _state(own_engine, old) == "archived"
