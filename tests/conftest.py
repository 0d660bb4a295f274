"""Real services for the tests: an embedded PostgreSQL with pgvector, a Redis server, and (for end-to-end
tests) a Celery worker, a beat and the API as separate processes. Nothing of ours is mocked; only the LLM
is replaced, at the HTTP boundary (tests/fakes/llm_server.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Services:
    pg_server_url: str
    """URL of the server's `postgres` database (for creating more databases)."""
    database_url: str
    redis_url: str
    data_dir: Path
    pg_dir: Path
    """The embedded server's data directory (a replica is copied from it)."""

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            **os.environ,
            "HINDSIGHT_ENV": "test",
            "HINDSIGHT_DATABASE_URL": self.database_url,
            "HINDSIGHT_REDIS_URL": self.redis_url,
            "HINDSIGHT_DATA_DIR": str(self.data_dir),
            "HINDSIGHT_LOG_JSON": "true",
            "HINDSIGHT_LOG_FILE": str(self.data_dir / "hindsight.jsonl"),
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",  # output reaches the log file at once (and an erase's scrub)
        }
        env.update(extra)
        return env

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """An empty database, or a copy of `template` (which nobody may be connected to)."""
        engine = sa.create_engine(self.pg_server_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
        engine.dispose()
        return sa.engine.make_url(self.pg_server_url).set(database=name).render_as_string(hide_password=False)

    def drop_database(self, name: str) -> None:
        engine = sa.create_engine(self.pg_server_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the stack (worker, beat and API processes) is `e2e`, whichever module it is in, so
    `make test-fast` (which deselects e2e, faults, fuzz, eval and slow; pyproject.toml) needs no list of files."""
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """PostgreSQL (pgserver, pgvector) and Redis (redis-server on a Unix socket), owned by the test run."""
    from hindsight.local_servers import start_postgres, start_redis, stop_postgres

    base = tmp_path_factory.mktemp("services")
    pg_dir = base / "pg"
    server_url = start_postgres(pg_dir)
    redis = start_redis(base / "redis", persist=False)
    svc = Services(
        pg_server_url=server_url, database_url="", redis_url=redis.url, data_dir=base / "data", pg_dir=pg_dir
    )
    svc.data_dir.mkdir()
    svc.database_url = svc.create_database("hindsight_test")

    from hindsight.config import get_settings
    from hindsight.db import migrate

    os.environ.update(
        {
            "HINDSIGHT_ENV": "test",
            "HINDSIGHT_DATABASE_URL": svc.database_url,
            "HINDSIGHT_REDIS_URL": svc.redis_url,
            "HINDSIGHT_DATA_DIR": str(svc.data_dir),
        }
    )
    get_settings.cache_clear()
    migrate.upgrade(svc.database_url)
    try:
        yield svc
    finally:
        from hindsight.services.recall import flush_access_counts

        flush_access_counts()  # recall's pending access counts, while the database is still up
        redis.stop()
        stop_postgres(pg_dir)


@pytest.fixture(scope="session")
def engine(services: Services) -> Iterator[sa.Engine]:
    eng = sa.create_engine(services.database_url.replace("postgresql://", "postgresql+psycopg://"))
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def migrated_template(services: Services) -> str:
    """A migrated database that `own_engine` copies, so the migrations run once, not once per test."""
    from hindsight.db import migrate

    name = "hindsight_template"
    migrate.upgrade(services.create_database(name))  # alembic's engine is a NullPool: nothing stays connected
    return name


@pytest.fixture
def own_engine(services: Services, migrated_template: str) -> Iterator[sa.Engine]:
    """A migrated database of this test's own, for the jobs that read the whole table (lifecycle, reindex,
    backfills): on the shared database they would also see, count and move the rows other tests left."""
    name = f"own_{uuid.uuid4().hex[:12]}"
    url = services.create_database(name, template=migrated_template)
    eng = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        yield eng
    finally:
        eng.dispose()
        services.drop_database(name)


@pytest.fixture
def namespace() -> str:
    """A fresh namespace per test: tests share the database but never each other's rows."""
    return f"t-{uuid.uuid4().hex[:12]}"


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 20) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class Stack:
    services: Services
    api_url: str
    procs: dict[str, Proc] = field(default_factory=dict)

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.output()[-4000:]}" for n, p in self.procs.items())


def start_proc(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> Proc:
    log = log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
    popen = subprocess.Popen(
        [sys.executable, "-m", "hindsight.cli", *args],
        env=env,
        cwd=str(REPO),
        stdout=log.open("ab"),  # O_APPEND: an erase rewriting the file in place must not leave a hole
        stderr=subprocess.STDOUT,
    )
    return Proc(name=name, popen=popen, log=log)


def wait_for(predicate: Callable[[], object], timeout: float, what: str, procs: dict[str, Proc] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for p in (procs or {}).values():
            if p.popen.poll() is not None:
                raise AssertionError(f"{p.name} died (rc={p.popen.returncode}):\n{p.output()[-4000:]}")
        time.sleep(0.2)
    detail = "\n".join(f"--- {p.name} ---\n{p.output()[-3000:]}" for p in (procs or {}).values())
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{detail}")


def _worker_ready(proc: Proc) -> bool:
    return "worker.ready" in proc.output()


STACK_ENV = {
    "HINDSIGHT_BEAT__SWEEP_INTERVAL_SECONDS": "1",
    "HINDSIGHT_BEAT__IDLE_SESSIONS_INTERVAL_SECONDS": "1",
    "HINDSIGHT_BEAT__LIFECYCLE_INTERVAL_SECONDS": "3600",
    "HINDSIGHT_WORKER__SWEEP_AFTER_SECONDS": "5",
    "HINDSIGHT_WORKER__MAX_ATTEMPTS": "3",
    "HINDSIGHT_WORKER__RETRY_BACKOFF_MAX_SECONDS": "1",
    "HINDSIGHT_WORKING_MEMORY__MAX_TURNS": "4",
    "HINDSIGHT_WORKING_MEMORY__IDLE_CLOSE_SECONDS": "2",
}


@pytest.fixture(scope="session")
def stack(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A real worker process, a real beat process and the API served by uvicorn, on the test services."""
    # Where `hindsight up` puts its children's output (settings.process_log_dir): erase scrubs it.
    log_dir = services.data_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    env = services.env(**STACK_ENV)
    port = free_port()
    st = Stack(services=services, api_url=f"http://127.0.0.1:{port}")
    st.procs["worker"] = start_proc("worker", ["worker", "-c", "2"], env, log_dir)
    st.procs["beat"] = start_proc("beat", ["beat"], env, log_dir)
    st.procs["api"] = start_proc("api", ["api", "--port", str(port)], env, log_dir)
    try:
        wait_for(lambda: _worker_ready(st.procs["worker"]), 120, "worker ready", st.procs)
        wait_for(lambda: _http_ok(f"{st.api_url}/readyz"), 120, "API ready", st.procs)
        yield st
    finally:
        for p in st.procs.values():
            p.stop()


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
