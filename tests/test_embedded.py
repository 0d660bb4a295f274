"""The embedded PostgreSQL: one major version, and a data directory of another refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from hindsight.embedded import EMBEDDED_SETTINGS, check_data_dir_version, embedded_postgres_major


def test_the_embedded_server_is_the_major_version_it_says_with_its_settings(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        num = int(conn.execute(sa.text("SHOW server_version_num")).scalar_one())
        vector = conn.execute(sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar_one()
        settings = {name: conn.execute(sa.text(f"SHOW {name}")).scalar_one() for name in EMBEDDED_SETTINGS}
    assert settings == EMBEDDED_SETTINGS  # applied (and the server restarted) when the data directory was new
    assert num // 10_000 == embedded_postgres_major() >= 18
    assert tuple(int(x) for x in vector.split(".")[:2]) >= (0, 8)


def test_a_data_directory_of_another_major_is_refused_and_left_alone(tmp_path: Path) -> None:
    pg = tmp_path / "pg"
    pg.mkdir()
    (pg / "PG_VERSION").write_text("16\n")
    (pg / "base").mkdir()
    want = rf"PostgreSQL 16 database; the embedded server is PostgreSQL {embedded_postgres_major()}\."
    with pytest.raises(RuntimeError, match=want):
        check_data_dir_version(pg)
    assert sorted(p.name for p in pg.iterdir()) == ["PG_VERSION", "base"]  # nothing changed
    (pg / "PG_VERSION").write_text(f"{embedded_postgres_major()}\n")
    check_data_dir_version(pg)  # its own version passes
    check_data_dir_version(tmp_path / "new")  # as does a directory not made yet
