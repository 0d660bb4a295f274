"""Lifecycle transitions on the real database: windows per kind, ttl, pinning, and exactly-once under
concurrent schedulers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hindsight.config import LifecycleSettings
from hindsight.services.lifecycle import run_lifecycle
from tests.factories import create_memory

NOW = datetime(2026, 6, 1, tzinfo=UTC)


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


def test_per_kind_windows_pinning_and_archive(services, engine, namespace) -> None:
    settings = LifecycleSettings(stale_after_days={"project": 21, "preference": 90}, default_archive_after_days=30)
    old = NOW - timedelta(days=40)
    project = create_memory(engine, namespace, kind="project", at=old)
    preference = create_memory(engine, namespace, kind="preference", at=old)
    pinned = create_memory(engine, namespace, kind="project", at=old, pinned=True)

    run_lifecycle(engine, settings, now=NOW)
    assert _state(engine, project) == "stale"  # 40 days > project's 21
    assert _state(engine, preference) == "active"  # 40 days < preference's 90
    assert _state(engine, pinned) == "active"
    assert _audits(engine, project) == [("state_changed", "active", "stale")]

    run_lifecycle(engine, settings, now=NOW + timedelta(days=31))
    assert _state(engine, project) == "archived"
    assert _audits(engine, project)[-1] == ("state_changed", "stale", "archived")
    assert _state(engine, pinned) == "active"


def test_ttl_expiry_archives_unpinned_memories(services, engine, namespace) -> None:
    expiring = create_memory(engine, namespace, kind="fact", ttl_days=7, at=NOW - timedelta(days=8))
    fresh = create_memory(engine, namespace, kind="fact", ttl_days=7, at=NOW - timedelta(days=6))
    pinned = create_memory(engine, namespace, kind="fact", ttl_days=7, pinned=True, at=NOW - timedelta(days=8))
    report = run_lifecycle(engine, LifecycleSettings(), now=NOW)
    assert report.expired >= 1
    assert _state(engine, expiring) == "archived"
    assert _audits(engine, expiring) == [("ttl_expired", None, "archived")]
    assert _state(engine, fresh) == "active"
    assert _state(engine, pinned) == "active"


def test_two_schedulers_at_once_move_each_memory_exactly_once(services, engine, namespace) -> None:
    settings = LifecycleSettings(stale_after_days={"project": 1}, batch_size=7)
    ids = [create_memory(engine, namespace, kind="project", at=NOW - timedelta(days=5)) for _ in range(40)]
    barrier = threading.Barrier(4)
    reports = []

    def run() -> None:
        barrier.wait()
        reports.append(run_lifecycle(engine, settings, now=NOW))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(_state(engine, i) == "stale" for i in ids)
    assert all(len(_audits(engine, i)) == 1 for i in ids)
    moved_here = [m for r in reports for m in r.moved if m in set(ids)]
    assert sorted(moved_here) == sorted(ids), "each memory moved by exactly one scheduler"
