"""The OpenAI-compatible back-end in a real worker process, against a local chat-completions server with
scripted answers (a 429, malformed JSON, a valid answer): good transcripts are distilled, a poison one is
dead-lettered with its reason and the attempt history, and the rest keeps flowing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from hindsight.config import Settings
from hindsight.db.engine import read_session, session_scope
from hindsight.services.deadletters import list_dead_letters, requeue_dead_letters
from hindsight.services.ingest import parse_event, publish_transcripts
from schemas.events import TranscriptStatus
from tests.conftest import Proc, Services, start_proc, wait_for
from tests.fakes.llm_server import ScriptedLLMServer
from workers.publisher import CeleryPublisher

pytestmark = pytest.mark.e2e


def _answer(request: dict[str, Any]) -> str | dict[str, Any]:
    prompt = json.dumps(request["messages"], ensure_ascii=False)
    if "POISON" in prompt:
        return "this is not JSON at all {"
    return {
        "summary": "The user said which database they use.",
        "entities": ["CockroachDB"],
        "summary_turn_ids": ["0"],
        "facts": [
            {
                "kind": "fact",
                "key": "user.database",
                "value": "User runs CockroachDB in production",
                "source_turn_ids": ["0"],
                "negated": False,
                "supersedes_previous": False,
                "confidence": 0.9,
                "subject": "user",
            }
        ],
    }


@pytest.fixture(scope="module")
def llm_worker(
    services: Services, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ScriptedLLMServer, str, Proc]]:
    """A worker on its own Redis whose language back-end is the OpenAI client pointed at the fake server."""
    from hindsight.local_servers import start_redis

    base = tmp_path_factory.mktemp("llm")
    redis = start_redis(base / "redis", persist=False)
    server = ScriptedLLMServer(default=_answer).start()
    env = services.env(
        HINDSIGHT_REDIS_URL=redis.url,
        HINDSIGHT_LLM__BACKEND="openai",
        HINDSIGHT_LLM__BASE_URL=server.base_url,
        HINDSIGHT_LLM__API_KEY="test-key-not-secret",
        HINDSIGHT_LLM__MODEL="scripted-model",
        HINDSIGHT_LLM__MAX_RETRIES="1",
        HINDSIGHT_LLM__TIMEOUT_SECONDS="10",
        HINDSIGHT_WORKER__MAX_ATTEMPTS="2",
        HINDSIGHT_WORKER__RETRY_BACKOFF_MAX_SECONDS="1",
        HINDSIGHT_LOG_FILE=str(base / "llm-worker.jsonl"),
    )
    proc = start_proc("llm-worker", ["worker", "-c", "1"], env, base)
    try:
        wait_for(lambda: "worker.ready" in proc.output(), 120, "LLM worker ready", {"llm-worker": proc})
        yield server, redis.url, proc
    finally:
        proc.stop()
        server.stop()
        redis.stop()


def _sender(redis_url: str) -> CeleryPublisher:
    """Send distill tasks to the LLM worker's own Redis."""
    return CeleryPublisher.for_settings(Settings(redis_url=redis_url))


def _publish(redis_url: str, namespace: str, content: str) -> uuid.UUID:
    event = parse_event({"namespace": namespace, "turns": [{"role": "user", "content": content}]})
    with session_scope() as session:
        accepted = publish_transcripts(session, [event], publisher=_sender(redis_url))
    return accepted[0].id


def _dead_letters(engine: sa.Engine, namespace: str) -> list[TranscriptStatus]:
    with read_session(engine) as session:
        return list_dead_letters(session, namespace=namespace)


def _row(engine: sa.Engine, tid: uuid.UUID) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(
            conn.execute(
                sa.text("SELECT state, attempts, last_error, attempt_log FROM transcripts WHERE id=:i"),
                {"i": tid},
            )
            .mappings()
            .one()
        )


def test_llm_backend_distills_through_429_and_dead_letters_poison(
    llm_worker: tuple[ScriptedLLMServer, str, Proc], engine: sa.Engine, namespace: str
) -> None:
    server, redis_url, proc = llm_worker
    procs = {"llm-worker": proc}
    server.enqueue_error(429, headers={"retry-after": "0"})  # the first call is rate-limited, then answered

    good = _publish(redis_url, namespace, "We run CockroachDB in production.")
    wait_for(lambda: _row(engine, good)["state"] == "done", 60, "good transcript done", procs)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT value, source, backend FROM memories WHERE namespace=:n"), {"n": namespace}
        ).all()
    assert [(r[0], r[1]) for r in rows] == [("User runs CockroachDB in production", "user")]
    assert rows[0][2] == "openai:scripted-model/distill_v1.2"
    sent = server.requests[0]
    assert sent["model"] == "scripted-model"
    assert sent["temperature"] == 0
    assert sent["response_format"]["type"] == "json_schema"

    poison = _publish(redis_url, namespace, "POISON transcript the model cannot answer")
    wait_for(lambda: _row(engine, poison)["state"] == "dead", 90, "poison transcript dead-lettered", procs)
    dead = _row(engine, poison)
    assert "PermanentError" in dead["last_error"]
    assert "JSON" in dead["last_error"]
    assert dead["attempts"] == 1
    assert len(dead["attempt_log"]) == 1

    # The worker is still healthy and keeps distilling.
    after = _publish(redis_url, namespace + "-b", "We run CockroachDB in production.")
    wait_for(lambda: _row(engine, after)["state"] == "done", 60, "work after the poison", procs)
    assert proc.popen.poll() is None


def test_dead_letters_can_be_listed_and_requeued(
    llm_worker: tuple[ScriptedLLMServer, str, Proc], engine: sa.Engine, namespace: str
) -> None:
    server, redis_url, proc = llm_worker
    poison = _publish(redis_url, namespace, "POISON again")
    wait_for(lambda: _row(engine, poison)["state"] == "dead", 90, "dead-lettered", {"llm-worker": proc})
    assert poison in [r.id for r in _dead_letters(engine, namespace)]

    # "Fix" the model, then re-queue: the transcript is distilled.
    server.default = lambda req: _answer({"messages": [{"content": "fixed"}]})
    try:
        with session_scope(engine) as session:
            requeued = requeue_dead_letters(session, ids=[poison], publisher=_sender(redis_url))
        assert requeued == [poison]
        wait_for(
            lambda: _row(engine, poison)["state"] == "done",
            60,
            "re-queued transcript done",
            {"llm-worker": proc},
        )
    finally:
        server.default = _answer
    assert _dead_letters(engine, namespace) == []
