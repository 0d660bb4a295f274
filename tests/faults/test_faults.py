"""Fault injection on real processes: nothing accepted is lost, nothing is distilled twice.

Every scenario runs a real Celery worker and beat on the suite's own PostgreSQL and Redis, publishes a
workload of canary transcripts (see conftest.py), injects one fault, waits for quiescence and counts by SQL:
lost (accepted but neither done nor dead-lettered, or done without its canary memory) and duplicated (two
active memories for one canary, two episodes for one transcript, two identical audit or provenance rows).
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psutil
import pytest
import sqlalchemy as sa

from tests.conftest import free_port, start_proc, wait_for
from tests.fakes.llm_server import ScriptedLLMServer
from tests.faults.conftest import (
    Counts,
    FaultServices,
    FaultStack,
    Publisher,
    canary_events,
    counts,
    new_prefix,
    report,
    wait_progress,
    wait_quiescent,
)

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(600)]

N = 100
"""Transcripts per scenario (each with its own canary); the whole suite distils about 900."""


def assert_clean(c: Counts, *, accepted: int, dead: int = 0) -> None:
    assert c.accepted == accepted
    assert c.lost == 0, c
    assert c.duplicated == 0, c
    assert c.dead == dead, c
    assert c.done == accepted - dead


def _row(engine: sa.Engine, tid: uuid.UUID) -> dict[str, Any]:
    with engine.connect() as conn:
        q = sa.text("SELECT state, attempts, last_error, attempt_log, namespace FROM transcripts WHERE id = :i")
        return dict(conn.execute(q, {"i": tid}).mappings().one())


# -- 1. kill -9 of a worker child in the middle of a slow LLM call ---------------------------------------------

CANARY = re.compile(r"cnry[0-9a-f]{8}")


class SlowOnceLLM:
    """Answers every transcript with its canary fact; the first call for a SLOW transcript hangs."""

    def __init__(self) -> None:
        self.slow_started = threading.Event()
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt = json.dumps(request["messages"], ensure_ascii=False)
        found = CANARY.findall(prompt)
        c = found[-1] if found else "none"
        with self.lock:
            self.calls[c] = self.calls.get(c, 0) + 1
            first = self.calls[c] == 1
        if "SLOW" in prompt and first:
            self.slow_started.set()
            time.sleep(45)  # the worker child is killed during this call
        return {
            "summary": f"The user uses {c}.",
            "entities": [c],
            "summary_turn_ids": ["0"],
            "facts": [
                {
                    "kind": "preference",
                    "key": f"user.tools.{c}",
                    "value": f"User uses {c} every day",
                    "source_turn_ids": ["0"],
                    "negated": False,
                    "supersedes_previous": False,
                    "confidence": 0.9,
                    "subject": "user",
                }
            ],
        }


def test_kill_worker_child_during_slow_llm_call(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    llm = SlowOnceLLM()
    server = ScriptedLLMServer(default=llm).start()
    try:
        worker = fault_stack.start_worker(
            HINDSIGHT_LLM__BACKEND="openai",
            HINDSIGHT_LLM__BASE_URL=server.base_url,
            HINDSIGHT_LLM__API_KEY="test-key-not-secret",
            HINDSIGHT_LLM__MODEL="scripted-model",
            HINDSIGHT_LLM__TIMEOUT_SECONDS="120",
            HINDSIGHT_LLM__MAX_RETRIES="1",
        )
        fault_stack.start_beat()
        prefix = new_prefix()
        pub = Publisher(fault_services, fault_engine)
        (slow,) = pub.publish(canary_events(prefix, 1, text="I use {canary} for all my projects. SLOW"))
        assert llm.slow_started.wait(60), "the slow LLM call never started"

        # The child holding the connection to the LLM server is the one inside the slow call. Look before more
        # work arrives: once it does, the other child is talking to the server too.
        victims = [
            ch
            for ch in fault_stack.children()
            if any(c.raddr and c.raddr.port == server.port for c in ch.net_connections(kind="tcp"))
        ]
        assert len(victims) == 1, victims
        pub.publish(canary_events(prefix, 40))
        victims[0].send_signal(signal.SIGKILL)

        c = wait_quiescent(fault_engine, prefix, 41, 120, fault_stack.live())
        report("kill -9 worker child mid LLM call", c, time.monotonic() - t0)
        assert_clean(c, accepted=41)
        row = _row(fault_engine, slow)
        assert row["state"] == "done"
        assert row["attempts"] == 2  # the killed attempt, then the redelivered one
        assert llm.calls[row["namespace"].split("-", 1)[1]] == 2
        assert "WorkerLostError" in worker.output() or "SIGKILL" in worker.output()
    finally:
        server.stop()


# -- 2. kill -9 of the whole worker while it holds reserved tasks ---------------------------------------------


def test_kill_whole_worker_holding_reserved_tasks(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    from hindsight.broker import redis_client

    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    pub = Publisher(fault_services, fault_engine)
    pub.publish(canary_events(prefix, N))
    wait_progress(fault_engine, prefix, 20)
    fault_stack.kill_all("worker")
    # The dead worker's messages are reserved, not acknowledged: they sit in kombu's `unacked` hash.
    held = redis_client(fault_services.redis_url).hlen("unacked")
    assert held >= 1
    assert counts(fault_engine, prefix).unfinished > 0

    fault_stack.start_worker("worker2")
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report("kill -9 whole worker", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)


# -- 2b. two worker nodes on one queue, one of them killed mid-stream -------------------------------------------


def test_two_worker_nodes_share_the_queue_exactly_once(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    """Workers on several hosts are several Celery nodes on one queue: here two processes with their own node
    names. Both take work; when one is killed with tasks reserved, the other finishes everything (its own
    tasks, and the dead node's once the sweeper republishes them), and every transcript is distilled once."""
    t0 = time.monotonic()
    one = fault_stack.start_worker("node-a", node="node-a@%h")
    two = fault_stack.start_worker("node-b", node="node-b@%h")
    fault_stack.start_beat()
    prefix = new_prefix()
    Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
    assert "node-a@" in one.output()
    assert "node-b@" in two.output()

    def completed(proc: Any) -> int:
        return int(proc.output().count("distill.transcript.completed"))

    # Both take work. Waited for, not sampled at a fixed point: on a loaded machine one node's children may load
    # the embedding model long after the other's have started working (CI saw node-a finish the first 30 alone).
    wait_for(lambda: completed(one) > 0 and completed(two) > 0, 180, "both nodes to distill", fault_stack.live())
    done_by_b = completed(two)
    left = N - counts(fault_engine, prefix).done
    fault_stack.kill_all("node-a")
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report("two nodes, one killed", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)
    if left > 0:
        assert completed(two) > done_by_b  # the survivor went on alone


# -- 3. a crash after the database commit and before the acknowledgement --------------------------------------


def test_crash_after_commit_before_ack(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    tokens = fault_services.base / "data" / "crash-after-commit"
    tokens.mkdir(parents=True, exist_ok=True)
    for i in range(4):
        (tokens / f"token-{i}").touch()
    try:
        worker = fault_stack.start_worker(hooks=True)
        fault_stack.start_beat()
        prefix = new_prefix()
        Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
        c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
        report("crash after commit, before ack", c, time.monotonic() - t0)
        crashed = [uuid.UUID(p.name.removeprefix("crashed-")) for p in tokens.glob("crashed-*")]
        assert len(crashed) == 4, worker.output()[-3000:]
        assert_clean(c, accepted=N)
        for tid in crashed:
            row = _row(fault_engine, tid)
            # Redelivered after the crash, the task found the transcript done and did nothing (no new attempt).
            assert (row["state"], row["attempts"]) == ("done", 1)
        assert worker.output().count("WorkerLostError") >= 4
    finally:
        for p in tokens.iterdir():
            p.unlink()


# -- 4. Redis restarted under load, and killed and restarted empty --------------------------------------------


def test_redis_restarted_under_load(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    pub = Publisher(fault_services, fault_engine)
    pub.publish(canary_events(prefix, N // 2))
    wait_progress(fault_engine, prefix, 10)
    more = canary_events(prefix, N // 2)
    feeder = threading.Thread(target=lambda: [pub.publish([e]) for e in more])  # publishes through the restart
    feeder.start()
    fault_services.redis_restart(down_for=2.0)
    feeder.join(60)
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report(f"Redis restarted under load (send failures {pub.send_failures})", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)


def test_redis_killed_and_restarted_empty(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
    wait_progress(fault_engine, prefix, 10)
    fault_services.redis_restart(empty=True, down_for=1.0)
    # The fault is real: Redis came back holding fewer messages than there is unfinished work (the sweeper may
    # already be re-sending some), so only PostgreSQL knows what is left to do.
    assert fault_services.redis_messages() < counts(fault_engine, prefix).unfinished
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report("Redis killed and restarted empty", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)


# -- 5. PostgreSQL restarted mid-transaction, and down for a while --------------------------------------------


def test_postgres_crash_restart_mid_transaction(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    pub = Publisher(fault_services, fault_engine)
    pub.publish(canary_events(prefix, N))
    wait_progress(fault_engine, prefix, 20)
    fault_services.pg_stop("immediate")  # every backend dies mid-transaction; crash recovery on start
    fault_services.pg_start()
    pub.publish(canary_events(prefix, 20))
    c = wait_quiescent(fault_engine, prefix, N + 20, 300, fault_stack.live())
    report("PostgreSQL crash-restarted mid-transaction", c, time.monotonic() - t0)
    assert_clean(c, accepted=N + 20)


def test_postgres_down_for_a_while(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
    wait_progress(fault_engine, prefix, 20)
    fault_services.pg_stop("fast")
    time.sleep(15)
    for name, proc in fault_stack.procs.items():  # nobody gave up while the database was away
        assert proc.popen.poll() is None, f"{name} died:\n{proc.output()[-3000:]}"
    fault_services.pg_start()
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report("PostgreSQL down for 15 s", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)


# -- 6. a poison transcript that always fails -----------------------------------------------------------------


def test_poison_transcript_is_dead_lettered_and_the_rest_flows(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    from hindsight.db.engine import read_session
    from hindsight.services.deadletters import list_dead_letters

    t0 = time.monotonic()
    fault_stack.start_worker()
    fault_stack.start_beat()
    prefix = new_prefix()
    pub = Publisher(fault_services, fault_engine)
    # A row no validator would accept (a turn without content): written straight into the table, the way a
    # bad migration or a buggy producer might leave it. Every attempt fails the same way.
    poison = uuid.uuid4()
    with fault_engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO transcripts (id, namespace, conversation_id, idempotency_key, event_type, turns,"
                " occurred_at, state, attempts, attempt_log, redactions, updated_at)"
                " VALUES (:id, :ns, 'c', :k, 'conversation_end', CAST(:turns AS jsonb), now(), 'accepted', 0,"
                " '[]'::jsonb, '[]'::jsonb, now())"
            ),
            {"id": poison, "ns": f"{prefix}-cnrypoison", "k": uuid.uuid4().hex, "turns": '[{"role": "user"}]'},
        )
    pub.send_distill([poison])
    pub.publish(canary_events(prefix, N))
    c = wait_quiescent(fault_engine, prefix, N + 1, 300, fault_stack.live())
    report("poison transcript", c, time.monotonic() - t0)
    assert c.lost == 0, c
    assert c.duplicated == 0, c
    assert (c.done, c.dead) == (N, 1)
    row = _row(fault_engine, poison)
    assert row["state"] == "dead"
    assert row["attempts"] == 6  # worker.max_attempts
    assert len(row["attempt_log"]) == 6
    assert all("KeyError" in a["error"] for a in row["attempt_log"])
    with read_session(fault_engine) as session:
        dead = list_dead_letters(session, namespace=row["namespace"])
    assert poison in [d.id for d in dead]


# -- 7. two beat processes running the lifecycle together -----------------------------------------------------


def test_two_beats_run_the_lifecycle_together(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    fault_stack.start_worker(  # read by the worker, which runs the job beat sends
        HINDSIGHT_LIFECYCLE__DEFAULT_ARCHIVE_AFTER_DAYS="0",
        HINDSIGHT_LIFECYCLE__BATCH_SIZE="7",
    )
    prefix = new_prefix()
    Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    assert_clean(c, accepted=N)
    # Age every canary memory past its stale window, then let two beats fire the lifecycle every second.
    with fault_engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE memories SET last_verified_at = now() - interval '400 days' WHERE namespace LIKE :p || '-%'"
            ),
            {"p": prefix},
        )
    beat_env = {"HINDSIGHT_BEAT__LIFECYCLE_INTERVAL_SECONDS": "1"}
    beats = [fault_stack.start_beat("beat-a", **beat_env), fault_stack.start_beat("beat-b", **beat_env)]

    def all_archived() -> bool:
        with fault_engine.connect() as conn:
            q = "SELECT count(*) FROM memories WHERE namespace LIKE :p || '-%' AND state = 'archived'"
            return conn.execute(sa.text(q), {"p": prefix}).scalar_one() == N

    wait_for(all_archived, 120, "every memory archived", fault_stack.live())
    time.sleep(3)  # a few more runs of both beats: nothing may move twice
    for b in beats:
        assert b.popen.poll() is None, b.output()[-2000:]
    assert fault_stack.procs["worker"].output().count("Task lifecycle.run[") >= 6
    with fault_engine.connect() as conn:
        moves = conn.execute(
            sa.text(
                "SELECT from_state, to_state, count(*) AS n, count(DISTINCT memory_id) AS m FROM memory_audit"
                " WHERE namespace LIKE :p || '-%' AND actor = 'lifecycle' GROUP BY from_state, to_state"
            ),
            {"p": prefix},
        ).all()
    assert sorted((r.from_state, r.to_state, r.n, r.m) for r in moves) == [
        ("active", "stale", N, N),
        ("stale", "archived", N, N),
    ]
    c = counts(fault_engine, prefix)
    report("two beats running the lifecycle", c, time.monotonic() - t0)
    assert c.duplicated == 0, c
    assert c.unfinished == 0


# -- 8. graceful shutdown on SIGTERM --------------------------------------------------------------------------


def test_sigterm_stops_worker_beat_and_api_gracefully(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    worker = fault_stack.start_worker()
    beat = fault_stack.start_beat()
    port = free_port()
    api = start_proc("api", ["api", "--port", str(port)], fault_stack.env, fault_stack.log_dir)
    fault_stack.procs["api"] = api
    wait_for(lambda: _ready(port), 60, "API ready", fault_stack.live())
    prefix = new_prefix()
    Publisher(fault_services, fault_engine).publish(canary_events(prefix, N))
    wait_progress(fault_engine, prefix, 10)
    for proc in (worker, beat, api):
        proc.popen.send_signal(signal.SIGTERM)
    # uvicorn re-raises the SIGTERM it handled once it has shut down, so the API's status is -SIGTERM.
    for proc, ok in ((worker, {0}), (beat, {0}), (api, {0, -signal.SIGTERM})):
        assert proc.popen.wait(timeout=60) in ok, proc.output()[-3000:]
        fault_stack.procs.pop(proc.name)
    assert "Finished server process" in api.output()
    assert "worker.shutting_down" in worker.output()
    assert not psutil.pid_exists(worker.popen.pid)

    fault_stack.start_worker("worker2")
    fault_stack.start_beat("beat2")
    c = wait_quiescent(fault_engine, prefix, N, 300, fault_stack.live())
    report("SIGTERM worker, beat and API under load", c, time.monotonic() - t0)
    assert_clean(c, accepted=N)


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_counts_detect_loss_and_duplication(fault_services: FaultServices, fault_engine: sa.Engine) -> None:
    """The counting SQL itself: a transcript left unfinished, a missing canary and a duplicated memory show."""
    prefix = new_prefix()
    now = datetime.now(UTC)
    ids = Publisher(fault_services, fault_engine).publish(canary_events(prefix, 3))
    c = counts(fault_engine, prefix)
    assert (c.accepted, c.unfinished, c.lost) == (3, 3, 3)
    with fault_engine.begin() as conn:
        conn.execute(sa.text("UPDATE transcripts SET state = 'done' WHERE id = ANY(:i)"), {"i": ids[:2]})
        ns = conn.execute(sa.text("SELECT namespace FROM transcripts WHERE id = :i"), {"i": ids[0]}).scalar_one()
        for _ in range(2):
            conn.execute(
                sa.text(
                    "INSERT INTO memories (id, namespace, kind, key, value, subject, source, confidence, state,"
                    " pinned, negated, has_conflict, embedding, search_text, backend, embedding_model,"
                    " created_at, updated_at, last_verified_at, state_changed_at)"
                    " VALUES (:id, :ns, 'preference', 'k', :v, 'user', 'user', 0.9, 'active', false, false, false,"
                    " CAST(:e AS halfvec), '', 'test', 'test', :t, :t, :t, :t)"
                ),
                {
                    "id": uuid.uuid4(),
                    "ns": ns,
                    "v": f"User uses {ns.split('-', 1)[1]} every day",
                    "e": str([0.1] * _dim(fault_engine)),
                    "t": now,
                },
            )
    c = counts(fault_engine, prefix)
    assert (c.unfinished, c.missing_canaries, c.dup_memories) == (1, 1, 1)
    assert (c.lost, c.duplicated) == (2, 1)


def _dim(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        q = "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
        return int(conn.execute(sa.text(q)).scalar_one())


# -- 9. Redis down at ingest: the transcript is accepted (it is committed) and the sweeper sends it later ------


def test_ingest_while_redis_is_down_accepts_and_recovers(
    fault_services: FaultServices, fault_engine: sa.Engine, fault_stack: FaultStack
) -> None:
    t0 = time.monotonic()
    port = free_port()
    api = start_proc("api", ["api", "--port", str(port)], fault_stack.env, fault_stack.log_dir)
    fault_stack.procs["api"] = api
    wait_for(lambda: _ready(port), 60, "API ready", fault_stack.live())
    prefix = new_prefix()
    fault_services.redis.process.kill()
    fault_services.redis.process.wait()
    events = canary_events(prefix, 5)
    for e in events:
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/namespaces/{e.namespace}/transcripts",
            json={"turns": [t.model_dump(exclude_none=True) for t in e.turns]},
            timeout=60,
        )
        # Committed to PostgreSQL is accepted: the queue is only a notification, the sweeper re-sends it.
        assert r.status_code == 202, r.text
    fault_services.redis_restart()
    fault_stack.start_worker()
    fault_stack.start_beat()
    c = wait_quiescent(fault_engine, prefix, 5, 120, fault_stack.live())
    report("ingest while Redis is down", c, time.monotonic() - t0)
    assert_clean(c, accepted=5)
