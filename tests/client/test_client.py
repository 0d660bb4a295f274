"""`from hindsight import MemoryClient` against a real API process (with tokens), a real worker and beat."""

from __future__ import annotations

import time
import uuid

import pytest

from hindsight import MemoryClient
from hindsight.client import Conflict, Forbidden, Hit, Unauthorized
from hindsight.errors import InvalidInput, NotFound, TransientError
from tests.api.conftest import AuthApi
from tests.conftest import free_port


def test_the_agent_developer_flow(auth_api: AuthApi, alpha_ns: str) -> None:
    with MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns) as memory:
        written = memory.remember("I prefer dark mode in every editor.", metadata={"source_app": "tests"})
        assert written[0]["memory"]["namespace"] == alpha_ns

        hits = memory.recall("dark mode editor", top_k=3, min_score=0)
        assert hits
        assert isinstance(hits[0], Hit)
        assert "dark mode" in hits[0].content
        assert 0 < hits[0].score <= 1
        assert hits[0].metadata["confidence"] > 0
        assert hits[0].metadata["key"].startswith("user.")
        assert {"vector", "keyword", "recency", "trust"} <= set(hits[0].metadata["parts"])
        assert "age_days" in hits[0].metadata

        mid = hits[0].id
        assert memory.verify(mid)["state"] == "active"
        assert memory.forget(mid, reason="test")["state"] == "forgotten"
        assert memory.recall("dark mode editor", min_score=0) == []
        assert memory.unforget(mid)["state"] == "active"
        assert memory.get(mid)["history"][-1]["action"] == "unforgotten"

        block = memory.context("which theme does the user like?", budget_tokens=200)
        assert block["tokens"] <= 200

        w = memory.write("project.deadline", "The launch deadline is 2027-03-01", kind="project", pinned=True)
        assert w["action"] == "insert"
        assert w["memory"]["pinned"] is True
        erased = memory.erase(w["memory"]["id"])
        assert erased["memory_ids"] == [w["memory"]["id"]]
        with pytest.raises(NotFound):
            memory.get(w["memory"]["id"])


def test_recall_within_a_token_budget(auth_api: AuthApi, alpha_ns: str) -> None:
    """`budget_tokens` keeps the hits the context block would admit: a prefix-ordered subset of the unbounded
    hits, whose rendering the server counts within the budget."""
    import httpx

    with MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns) as memory:
        for text in (
            "I prefer dark mode in every editor.",
            "I am allergic to peanuts.",
            "I live in Lyon.",
        ):
            memory.remember(text)
        everything = memory.recall("dark editor", min_score=0)
        tight = memory.recall("dark editor", min_score=0, budget_tokens=64)
        roomy = memory.recall("dark editor", min_score=0, budget_tokens=4000)
    assert len(everything) == 3
    assert 1 <= len(tight) < len(everything)
    ids = [h.id for h in everything]
    assert [h.id for h in tight] == [i for i in ids if i in {h.id for h in tight}]  # recall's order kept
    assert [h.id for h in roomy] == ids
    raw = httpx.get(
        f"{auth_api.url}/v1/namespaces/{alpha_ns}/search",
        params={"q": "dark editor", "min_score": 0, "budget_tokens": 64, "model": "gpt-4o"},
        headers={"Authorization": "Bearer tok-alpha"},
    ).json()
    assert raw["tokens"] <= 64
    assert raw["truncated"] is True
    too_small = httpx.get(
        f"{auth_api.url}/v1/namespaces/{alpha_ns}/search",
        params={"q": "dark editor", "budget_tokens": 10},
        headers={"Authorization": "Bearer tok-alpha"},
    )
    assert too_small.status_code == 422


def test_working_memory_and_archiving_to_long_term(auth_api: AuthApi, alpha_ns: str) -> None:
    memory = MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns)
    sid = f"chat-{uuid.uuid4().hex[:6]}"
    assert memory.append_working_memory(sid, "user", "我们的数据库是 PostgreSQL 15。") is False
    assert memory.append_working_memory(sid, "assistant", "好的，记住了。") is False
    turns = memory.get_working_memory(sid)
    assert [t["role"] for t in turns] == ["user", "assistant"]
    assert turns[0]["content"] == "我们的数据库是 PostgreSQL 15。"
    assert memory.archive_to_long_term(sid) is True

    deadline = time.monotonic() + 90
    values: list[str] = []
    while time.monotonic() < deadline:
        values = [m["value"] for m in memory.list()["items"]]
        if any("PostgreSQL" in v for v in values):
            break
        time.sleep(0.5)
    assert any("PostgreSQL" in v for v in values), values
    hits = memory.recall("数据库", min_score=0)
    assert any("PostgreSQL" in h.content for h in hits)
    episodes = memory.recall_episodes("我们用什么数据库？", top_k=3)
    assert episodes
    assert isinstance(episodes[0], Hit)
    assert "PostgreSQL" in episodes[0].content
    assert episodes[0].metadata["turn_ids"]
    assert {"occurred_at", "transcript_id", "cosine", "age_days"} <= set(episodes[0].metadata)
    rounds = memory.recall_rounds("我们用什么数据库？", top_k=3)
    assert rounds[0].content == "user: 我们的数据库是 PostgreSQL 15。\nassistant: 好的，记住了。"
    assert {"occurred_at", "transcript_id", "turn_ids", "seq", "keyword", "age_days"} <= set(rounds[0].metadata)
    block = memory.context("我们用什么数据库？", budget_tokens=300)
    assert block["tokens"] <= 300
    assert block["round_ids"] == [str(rounds[0].id)]
    # The round shows every turn the summary came from, so the summary is left out; without rounds it is there.
    assert block["episode_ids"] == []
    assert memory.context("我们用什么数据库？", budget_tokens=300, rounds=False)["episode_ids"] == [str(episodes[0].id)]
    bare = memory.context("我们用什么数据库？", episodes=False, rounds=False)
    assert bare["episode_ids"] == bare["round_ids"] == []
    with pytest.raises(NotFound):
        memory.get_working_memory("no-such-session")
    memory.close()


def test_publish_transcript_is_idempotent(auth_api: AuthApi, alpha_ns: str) -> None:
    memory = MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns)
    turns = [{"role": "user", "content": "I live in Lisbon."}]
    a = memory.publish_transcript(turns, conversation_id="c1", idempotency_key="k1")
    b = memory.publish_transcript(turns, conversation_id="c1", idempotency_key="k1")
    assert a["id"] == b["id"]
    assert (a["duplicate"], b["duplicate"]) == (False, True)
    assert memory.transcript_status(a["id"])["state"] in ("accepted", "processing", "done")


def test_http_statuses_become_typed_errors(auth_api: AuthApi, alpha_ns: str, beta_ns: str) -> None:
    with pytest.raises(Unauthorized):
        MemoryClient(auth_api.url, token="nope", namespace=alpha_ns).recall("x")
    alpha = MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns)
    with pytest.raises(Forbidden):
        alpha.recall("x", namespace=beta_ns)
    with pytest.raises(NotFound):
        alpha.verify(uuid.uuid4())
    with pytest.raises(InvalidInput):
        alpha.recall("x", top_k=0)
    with pytest.raises(InvalidInput):
        alpha.recall("   ")
    mid = alpha.write("user.os", "User runs NixOS")["memory"]["id"]
    alpha.forget(mid)
    with pytest.raises(Conflict):
        alpha.forget(mid)
    with pytest.raises(InvalidInput):
        MemoryClient(auth_api.url, token="tok-alpha").recall("x")  # no namespace anywhere
    with pytest.raises(TransientError):
        MemoryClient(f"http://127.0.0.1:{free_port()}", token="t", namespace=alpha_ns, timeout=2).recall("x")
