"""The embedded PostgreSQL: one major version, and a data directory of another refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from hindsight.local_servers import EMBEDDED_SETTINGS, check_data_dir_version, embedded_postgres_major


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


def test_resolving_a_url_starts_nothing_and_says_what_to_do(tmp_path: Path) -> None:
    """With no URL configured and no local stack running, get_engine and resolve_redis_url raise a clear error;
    no server is started (nothing is created in data_dir)."""
    from hindsight.broker import resolve_redis_url
    from hindsight.config import Settings
    from hindsight.db.engine import get_engine
    from hindsight.errors import NoServer

    data_dir = tmp_path / "data"
    settings = Settings(database_url=None, redis_url=None, data_dir=data_dir)
    with pytest.raises(NoServer, match=r"no database configured and no local stack running") as no_db:
        get_engine(settings)
    assert "run `hindsight up` or set HINDSIGHT_DATABASE_URL" in str(no_db.value)
    with pytest.raises(NoServer, match=r"no Redis configured and no local stack running") as no_redis:
        resolve_redis_url(settings)
    assert "run `hindsight up` or set HINDSIGHT_REDIS_URL" in str(no_redis.value)
    assert not data_dir.exists()


def test_resolving_a_url_attaches_to_the_local_stack_that_runs(services) -> None:
    """The embedded servers running in data_dir (here the test run's own, in its base directory) are found
    and used as they are."""
    from hindsight.broker import resolve_redis_url
    from hindsight.config import Settings
    from hindsight.db.engine import resolve_database_url

    settings = Settings(database_url=None, redis_url=None, data_dir=services.data_dir.parent)
    assert resolve_database_url(settings) == services.pg_server_url
    assert resolve_redis_url(settings) == services.redis_url
