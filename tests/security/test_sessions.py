"""Working memory under hostile or careless input (issue 10, findings 4 and 6): secrets never reach Redis,
session turns obey the ingest limits, pending stays bounded, a session that cannot be published is
dead-lettered with its turns, and one bad session never keeps beat from closing the others.

Real PostgreSQL, Redis, worker, beat and API (tests/conftest.py); the failures are real ones too: turns an
older version left in Redis, limits lowered between append and close, a database that is not there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from hindsight.broker import redis_client
from hindsight.config import LimitSettings, Settings, WorkingMemorySettings, get_settings
from hindsight.db.engine import read_session
from hindsight.services.deadletters import list_dead_letters
from hindsight.services.sessions import ACTIVE_SESSIONS, SessionStore, active_member, session_key, session_store
from schemas.events import TranscriptStatus, TurnIn
from schemas.pipeline import Role
from tests.conftest import Services, Stack, free_port, wait_for
from workers.publisher import CeleryPublisher

SECRETS = {
    "api_key": "sk-proj-Zq8vN3kLm2Xp7Rt4Yw9Bc6Hd1Jf5Gs0A",
    "password": "Tr0ub4dor-and-3",
    "card": "4111 1111 1111 1111",
    "national_id": "11010519491231002X",
    "github_token": "ghp_R4nd0mT0k3nV4lu3Xx9Yy8Zz7Ww6Vv5Uu4",
    "aws_key": "AKIAIOSFODNN7EXAMPLE",
}
NEEDLES = [*SECRETS.values(), SECRETS["card"].replace(" ", "")]


@pytest.fixture
def redis(services: Services) -> Iterator[Any]:
    client = redis_client(services.redis_url)
    yield client
    client.close()


def _dead_letters(engine: sa.Engine, namespace: str) -> list[TranscriptStatus]:
    with read_session(engine) as session:
        return list_dead_letters(session, namespace=namespace)


def _settings(**update: Any) -> Settings:
    return get_settings().model_copy(update=update)


def _pending(redis: Any, namespace: str, session_id: str) -> list[dict[str, Any]]:
    return [json.loads(r) for r in redis.lrange(session_key(namespace, session_id, "pending"), 0, -1)]


def _session_keys(redis: Any, namespace: str, session_id: str) -> dict[str, Any]:
    """What Redis holds for one session: its keys' values, and its place among the active sessions."""
    found: dict[str, Any] = {
        part: redis.lrange(session_key(namespace, session_id, part), 0, -1) for part in ("pending", "window")
    }
    found["seq"] = redis.get(session_key(namespace, session_id, "seq"))
    found["active"] = redis.zscore(ACTIVE_SESSIONS, active_member(namespace, session_id))
    return found


def _every_value(redis: Any) -> Iterator[tuple[bytes, bytes]]:
    """Every key of the server with every value it holds, whatever its type."""
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key).decode()
        values: list[Any]
        if kind == "string":
            values = [redis.get(key)]
        elif kind == "list":
            values = redis.lrange(key, 0, -1)
        elif kind == "hash":
            values = [x for kv in redis.hgetall(key).items() for x in kv]
        elif kind == "set":
            values = list(redis.smembers(key))
        elif kind == "zset":
            values = [m for m, _ in redis.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            values = [json.dumps({k.decode(): v.decode() for k, v in e[1].items()}).encode() for e in redis.xrange(key)]
        else:
            values = []
        yield key, key
        for v in values:
            if v is not None:
                yield key, v if isinstance(v, bytes) else str(v).encode()


def _transcripts(engine: sa.Engine, namespace: str) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT id, event_type, state, turns, last_error, conversation_id FROM transcripts "
                    "WHERE namespace=:n ORDER BY received_at, idempotency_key"
                ),
                {"n": namespace},
            )
        )


# -- finding 4: secrets ------------------------------------------------------------------------------------


def test_secrets_in_session_turns_never_reach_redis_nor_working_memory(
    stack: Stack, redis: Any, engine: sa.Engine, namespace: str
) -> None:
    sid = f"s-{uuid.uuid4().hex[:8]}"
    turns = [
        {"role": "user", "content": f"my openai key is {SECRETS['api_key']} and my password is {SECRETS['password']}"},
        {
            "role": "tool",
            "name": f"vault {SECRETS['github_token']}",
            "turn_id": f"t-{SECRETS['aws_key']}",
            "content": f"card {SECRETS['card']}, ID {SECRETS['national_id']}",
        },
        {"role": "assistant", "content": "Noted, I will not repeat those."},
    ]  # three turns: below the stack's max_turns (4), so all of them stay pending in Redis
    with httpx.Client(base_url=stack.api_url, timeout=30) as c:
        for turn in turns:
            r = c.post(f"/v1/namespaces/{namespace}/sessions/{sid}/turns", json=turn)
            assert r.status_code == 200, r.text
        assert len(_pending(redis, namespace, sid)) == 3

        leaks = [(k, n) for k, v in _every_value(redis) for n in NEEDLES if n.encode() in v]
        assert leaks == [], "secrets in Redis"

        wm = c.get(f"/v1/namespaces/{namespace}/sessions/{sid}")
        assert wm.status_code == 200
        body = wm.text
        assert not [n for n in NEEDLES if n in body]
        got = wm.json()["turns"]
        assert "[REDACTED:api_key]" in got[0]["content"]
        assert "[REDACTED:password]" in got[0]["content"]
        assert "[REDACTED:card_number]" in got[1]["content"]
        assert "[REDACTED:national_id]" in got[1]["content"]
        assert got[1]["name"] == "vault [REDACTED:github_token]"
        # An id holding a credential becomes a digest of itself: still unique, the credential gone.
        assert got[1]["turn_id"].startswith("sha256:")
        assert got[2]["content"] == "Noted, I will not repeat those."

        assert c.post(f"/v1/namespaces/{namespace}/sessions/{sid}/end").json() == {"published": True}
    rows = _transcripts(engine, namespace)
    assert [len(r.turns) for r in rows] == [3]
    assert not [n for n in NEEDLES if n in json.dumps(rows[0].turns)]


# -- finding 6: limits, bounded pending, dead letters, close_idle ---------------------------------------


def test_an_over_limit_turn_is_422_and_stores_nothing(stack: Stack, redis: Any, namespace: str) -> None:
    limit = get_settings().limits.max_turn_chars
    sid = f"s-{uuid.uuid4().hex[:8]}"
    url = f"/v1/namespaces/{namespace}/sessions/{sid}"
    with httpx.Client(base_url=stack.api_url, timeout=60) as c:
        # A new session whose first turn is too long does not come to exist.
        r = c.post(f"{url}/turns", json={"role": "user", "content": "x" * (limit + 1)})
        assert r.status_code == 422
        assert f"the limit is {limit}" in r.json()["detail"]
        assert c.get(url).status_code == 404
        assert not list(redis.scan_iter(match=f"hs:sess:{namespace}*"))

        assert c.post(f"{url}/turns", json={"role": "user", "content": "I live in Leeds."}).status_code == 200
        before = _session_keys(redis, namespace, sid)
        # Ten in a row: the old store kept the tenth (a turn-threshold append) and answered 422 all the same.
        for _ in range(10):
            r = c.post(f"{url}/turns", json={"role": "user", "content": "y" * (limit + 1)})
            assert r.status_code == 422, r.text
        assert _session_keys(redis, namespace, sid) == before
        assert [t["content"] for t in c.get(url).json()["turns"]] == ["I live in Leeds."]
        # A turn exactly at the limit is fine.
        assert c.post(f"{url}/turns", json={"role": "user", "content": "z" * limit}).status_code == 200
        assert c.post(f"{url}/end").json() == {"published": True}


def test_pending_is_flushed_before_it_would_exceed_the_transcript_limits(
    services: Services, redis: Any, engine: sa.Engine, namespace: str
) -> None:
    limits = LimitSettings(max_turns_per_transcript=3, max_turn_chars=1000, max_transcript_bytes=2048)
    settings = _settings(limits=limits, working_memory=WorkingMemorySettings(max_turns=1000))
    store = session_store(settings, redis_url=services.redis_url, publisher=CeleryPublisher(), engine=engine)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    appended: list[str] = []

    def append(content: str, **extra: Any) -> None:
        store.append(namespace, sid, TurnIn(role=Role.user, content=content, **extra))
        appended.append(content)
        pending = _pending(redis, namespace, sid)
        assert len(pending) <= limits.max_turns_per_transcript
        assert sum(len(p["content"].encode()) for p in pending) <= limits.max_transcript_bytes

    for i in range(5):  # 900 bytes each: two fit in 2048, a third would not
        append(f"{i}" + "b" * 899)
    for i in range(7):  # short ones: three turns a transcript
        append(f"short turn {i}")
    append("first with this id", turn_id="dup")
    append("second with this id", turn_id="dup")  # one transcript may not hold a turn id twice
    assert store.end(namespace, sid)

    rows = _transcripts(engine, namespace)
    assert rows
    assert all(r.state != "dead" for r in rows)
    for r in rows:
        assert len(r.turns) <= limits.max_turns_per_transcript
        assert sum(len(t["content"].encode()) for t in r.turns) <= limits.max_transcript_bytes
        assert len({t["turn_id"] for t in r.turns}) == len(r.turns)
    published = sorted((t for r in rows for t in r.turns), key=lambda t: appended.index(t["content"]))
    assert [t["content"] for t in published] == appended, "every turn published exactly once, in order"
    assert [r.event_type for r in rows][-1] == "conversation_end"
    assert _pending(redis, namespace, sid) == []


def test_an_append_whose_threshold_hand_over_fails_is_still_2xx_and_kept(
    services: Services, redis: Any, engine: sa.Engine, namespace: str
) -> None:
    # A database nobody listens on: the hand-over fails as it would while PostgreSQL is down.
    down = sa.create_engine(
        f"postgresql+psycopg://hindsight@127.0.0.1:{free_port()}/hindsight", connect_args={"connect_timeout": 2}
    )
    settings = _settings(working_memory=WorkingMemorySettings(max_turns=2))
    broken = session_store(settings, redis_url=services.redis_url, publisher=CeleryPublisher(), engine=down)
    sid = f"s-{uuid.uuid4().hex[:8]}"
    assert broken.append(namespace, sid, TurnIn(role=Role.user, content="I moved to Porto.")) is False
    assert broken.append(namespace, sid, TurnIn(role=Role.user, content="I work at a bakery.")) is False
    assert len(_pending(redis, namespace, sid)) == 2, "both turns kept for a later hand-over"
    assert redis.ttl(session_key(namespace, sid, "pending")) == -1, "pending never expires unpublished"
    assert redis.ttl(session_key(namespace, sid, "seq")) == -1
    down.dispose()

    # The database is back: the session's end hands both turns over.
    store = session_store(settings, redis_url=services.redis_url, publisher=CeleryPublisher(), engine=engine)
    assert store.end(namespace, sid) is True
    rows = _transcripts(engine, namespace)
    assert [[t["content"] for t in r.turns] for r in rows] == [["I moved to Porto.", "I work at a bakery."]]
    assert 0 < redis.ttl(session_key(namespace, sid, "seq")) <= settings.working_memory.ttl_seconds


def test_a_session_that_can_never_be_published_is_dead_lettered_with_its_turns(
    services: Services, redis: Any, engine: sa.Engine, namespace: str
) -> None:
    sid = f"s-{uuid.uuid4().hex[:8]}"
    appender = session_store(_settings(), redis_url=services.redis_url, publisher=CeleryPublisher(), engine=engine)
    appender.append(namespace, sid, TurnIn(role=Role.user, content="My sister Ana lives in Lisbon. " * 10))
    appender.append(namespace, sid, TurnIn(role=Role.user, content=f"my password is {SECRETS['password']}"))
    # The operator lowers the limit before the session is closed: ingest now refuses these turns for good.
    lowered = _settings(limits=LimitSettings(max_turn_chars=100))
    closer = session_store(lowered, redis_url=services.redis_url, publisher=CeleryPublisher(), engine=engine)
    assert closer.end(namespace, sid) is True

    dead = _dead_letters(engine, namespace)
    assert len(dead) == 1
    assert dead[0].state == "dead"
    assert dead[0].conversation_id == sid
    assert "the limit is 100" in (dead[0].last_error or "")
    rows = _transcripts(engine, namespace)
    assert [r.state for r in rows] == ["dead"]
    contents = [t["content"] for t in rows[0].turns]
    assert contents[0].startswith("My sister Ana lives in Lisbon.")
    assert contents[1] == "my password is [REDACTED:password]"
    # Handed over: nothing pending, no longer active, and a second end publishes nothing.
    assert _pending(redis, namespace, sid) == []
    assert redis.zscore(ACTIVE_SESSIONS, active_member(namespace, sid)) is None
    assert closer.end(namespace, sid) is False


def test_close_idle_goes_on_past_a_failing_session(stack: Stack, redis: Any, engine: sa.Engine, namespace: str) -> None:
    limit = get_settings().limits.max_turn_chars
    corrupt, oversized, good = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("corrupt", "big", "good"))
    # Left in Redis by an older version: an unreadable record, and a turn over the ingest limit that the old
    # store accepted. Idle for ages, so beat reaches them before the good session.
    redis.rpush(session_key(namespace, corrupt, "pending"), b"{not json")
    redis.rpush(
        session_key(namespace, oversized, "pending"),
        json.dumps({"seq": 1, "role": "user", "content": "I keep bees. " + "z" * limit}),
    )
    redis.set(session_key(namespace, oversized, "seq"), 1)
    redis.zadd(ACTIVE_SESSIONS, {active_member(namespace, corrupt): 1, active_member(namespace, oversized): 2})
    try:
        with httpx.Client(base_url=stack.api_url, timeout=30) as c:
            r = c.post(f"/v1/namespaces/{namespace}/sessions/{good}/turns", json={"role": "user", "content": "hi"})
            assert r.status_code == 200

        def by_session() -> dict[str, str]:
            return {r.conversation_id: r.state for r in _transcripts(engine, namespace)}

        wait_for(lambda: len(by_session()) == 2, 60, "beat to close the idle sessions", stack.procs)
        states = by_session()
        assert states[oversized] == "dead", "the oversized session is dead-lettered with its turn"
        assert states[good] in ("accepted", "processing", "done"), "the good session was closed"
        dead = [d for d in _dead_letters(engine, namespace) if d.conversation_id == oversized]
        assert len(dead) == 1
        assert f"the limit is {limit}" in (dead[0].last_error or "")
        # The unreadable one is kept (never silently dropped), retried each run, and logged with the reason.
        assert redis.lrange(session_key(namespace, corrupt, "pending"), 0, -1) == [b"{not json"]
        wait_for(lambda: corrupt in stack.procs["worker"].output(), 30, "the failure to be logged")
        failed = [line for line in stack.procs["worker"].output().splitlines() if corrupt in line]
        assert any("session.close_failed" in line and "JSONDecodeError" in line for line in failed), failed
    finally:
        redis.delete(session_key(namespace, corrupt, "pending"))
        redis.zrem(ACTIVE_SESSIONS, active_member(namespace, corrupt))


def test_the_store_answers_whether_a_session_exists(services: Services, engine: sa.Engine, namespace: str) -> None:
    store: SessionStore = session_store(
        _settings(), redis_url=services.redis_url, publisher=CeleryPublisher(), engine=engine
    )
    assert store.exists(namespace, "nope") is False
    store.append(namespace, "here", TurnIn(role=Role.user, content="hello"))
    assert store.exists(namespace, "here") is True
    store.end(namespace, "here")
    assert store.exists(namespace, "here") is True, "ending keeps working memory until its TTL"


def test_a_name_that_redaction_lengthens_is_still_appended_and_published(
    stack: Stack, engine: sa.Engine, namespace: str
) -> None:
    """Markers are longer than short passwords: the stored name outgrows the 128 characters a caller may send."""
    name = " ".join(f"pw: x{i}yz" for i in range(13))
    assert len(name) <= 128
    sid = f"s-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=stack.api_url, timeout=30) as c:
        r = c.post(
            f"/v1/namespaces/{namespace}/sessions/{sid}/turns", json={"role": "user", "name": name, "content": "hi"}
        )
        assert r.status_code == 200, r.text
        assert c.post(f"/v1/namespaces/{namespace}/sessions/{sid}/end").json() == {"published": True}
    (row,) = _transcripts(engine, namespace)
    assert row.turns[0]["name"].startswith("pw: [REDACTED:password]")
    assert "x0yz" not in json.dumps(row.turns)
