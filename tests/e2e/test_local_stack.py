"""`hindsight up --once`, the README's main command, on embedded defaults: its own PostgreSQL (pgserver) and
Redis, a worker, a beat and the API, fed with the bundled Chinese and English samples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from hindsight.local_servers import start_postgres, stop_postgres
from tests.conftest import free_port

pytestmark = pytest.mark.e2e


def test_up_runs_the_stack_on_embedded_defaults_and_shows_memories(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HINDSIGHT_")}
    env.update(
        {
            "HINDSIGHT_DATA_DIR": str(tmp_path / "hs"),
            "HINDSIGHT_API_PORT": str(free_port()),
            "HF_HUB_OFFLINE": "1",
            "COLUMNS": "200",
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "hindsight.cli", "up", "--once"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert "namespace demo-wang" in output
    assert "namespace demo-alice" in output
    assert "PostgreSQL 16" in output, "the Chinese sample's upgraded database is remembered"
    assert "hunter2" not in output, "a password planted in a tool turn never becomes a memory"
    assert (tmp_path / "hs" / "pg" / "PG_VERSION").exists(), "used the embedded PostgreSQL"
    assert (tmp_path / "hs" / "redis").is_dir(), "used the embedded Redis"
    assert "stopped" in output
    kept = [int(line.rsplit(":", 1)[1]) for line in output.splitlines() if "rounds kept for search:" in line]
    assert len(kept) == 2, "one line per sample namespace"
    assert all(n > 0 for n in kept), "every sample conversation's user turns are kept as rounds"
    # Nothing keeps running after --once.
    assert not (tmp_path / "hs" / "pg" / "postmaster.pid").exists()

    # What the store holds, read back from the same embedded data directory.
    url = start_postgres(tmp_path / "hs" / "pg")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT namespace, value, state, source FROM memories")).all()
    finally:
        engine.dispose()
        stop_postgres(tmp_path / "hs" / "pg")
    active = {(r[0], r[1]) for r in rows if r[2] == "active"}
    assert any(ns == "demo-alice" and "DuckDB" in v for ns, v in active), rows
    assert any(ns == "demo-wang" and "PostgreSQL 16" in v for ns, v in active), rows
    assert not any("PostgreSQL 14" in v for _, v in active), "the upgrade retired the old version"
    assert not any(r[3] == "tool" and r[2] == "active" for r in rows), "tool text never becomes active"
