"""Bad input at the HTTP boundary, generated from the API's own OpenAPI schema (schemathesis + hypothesis).

Against the real API process of the `stack` fixture (uvicorn, PostgreSQL, Redis, a worker): no request to
an ingest or read endpoint gets a 5xx, every rejection is a 4xx that says what is wrong, every transcript
the API accepted (202) is in PostgreSQL and gets distilled, and an oversized body gets 413 before it has
been sent whole.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings

from tests.conftest import Stack, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.fuzz]

ACCEPTED: list[tuple[str, str]] = []
"""(namespace, transcript id) of every 202 the fuzzer got."""


def _schema(stack: Stack) -> Any:
    return (
        schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json")
        .include(tag_regex="^(ingest|sessions|memories)$")
        .exclude(tag="privileged")
    )


def _clear_rejection(response: Any) -> str | None:
    """A 4xx must carry a JSON `detail` a person can act on; returns what is wrong, if anything."""
    try:
        body = response.json()
    except ValueError:
        return f"{response.status_code} without a JSON body: {response.text[:200]!r}"
    detail = body.get("detail") if isinstance(body, dict) else None
    if not detail:
        return f"{response.status_code} without a detail: {body!r}"[:300]
    return None


def test_fuzzed_requests_never_get_a_server_error(stack: Stack) -> None:
    """Each ingest and read operation, positive and negative cases generated from the schema."""
    operations = [r.ok() for r in _schema(stack).get_all_operations()]
    assert any(op.path.endswith("/transcripts") and op.method.upper() == "POST" for op in operations)
    assert len(operations) >= 6, [f"{op.method} {op.path}" for op in operations]
    failures: list[str] = []

    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            response = case.call(base_url=stack.api_url, timeout=60)
            where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
            if response.status_code >= 500:
                failures.append(where)
            elif response.status_code >= 400:
                problem = _clear_rejection(response)
                if problem is not None:
                    failures.append(f"{where}\n{problem}")
            if case.method == "POST" and case.path.endswith("/transcripts") and response.status_code == 202:
                body = response.json()
                ACCEPTED.append((body["namespace"], body["id"]))

        run()
    assert failures == [], "\n".join(failures[:20])


def test_every_accepted_fuzz_transcript_is_stored_and_distilled(stack: Stack, engine: sa.Engine) -> None:
    # Runs after the fuzzing above (same module, file order); the fuzzer always gets some 202s.
    assert ACCEPTED, "the fuzzer never got a transcript accepted"
    ids = [uuid.UUID(i) for _, i in ACCEPTED]

    def settled() -> bool:
        with engine.connect() as conn:
            q = sa.text("SELECT count(*) FROM transcripts WHERE id = ANY(:i) AND state IN ('done', 'dead')")
            return conn.execute(q, {"i": ids}).scalar_one() == len(set(ids))

    wait_for(settled, 180, "fuzzed transcripts distilled", stack.procs)
    with engine.connect() as conn:
        dead = conn.execute(
            sa.text("SELECT id, last_error FROM transcripts WHERE id = ANY(:i) AND state = 'dead'"), {"i": ids}
        ).all()
    assert dead == [], "valid (accepted) input must never be dead-lettered"
    for ns, tid in ACCEPTED[:20]:
        r = httpx.get(f"{stack.api_url}/v1/namespaces/{ns}/transcripts/{tid}", timeout=10)
        assert (r.status_code, r.json()["state"]) == (200, "done")


# -- oversized bodies -----------------------------------------------------------------------------------------


def _limit(stack: Stack) -> int:
    from hindsight.config import Settings

    return Settings().limits.max_transcript_bytes * 2


def _raw_request(stack: Stack, head: str, chunks: list[bytes]) -> bytes:
    url = urlparse(stack.api_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head.encode())
        for c in chunks:
            sock.sendall(c)
        sock.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            piece = sock.recv(4096)  # headers and body may come in separate packets
            if not piece:
                break
            answer += piece
        return answer


def test_declared_oversized_body_is_refused_before_it_is_sent(stack: Stack) -> None:
    limit = _limit(stack)
    head = (
        "POST /v1/namespaces/fuzz-big/transcripts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {limit + 1}\r\n\r\n"
    )
    t0 = time.monotonic()
    answer = _raw_request(stack, head, [])  # not one byte of the body is sent
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"exceeds" in answer
    assert time.monotonic() - t0 < 10


def test_streamed_oversized_body_is_refused_before_it_ends(stack: Stack) -> None:
    limit = _limit(stack)
    head = (
        "POST /v1/namespaces/fuzz-big/transcripts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 65536
    n = limit // len(piece) + 2  # just past the limit; the terminating chunk is never sent
    chunks = [f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for _ in range(n)]
    answer = _raw_request(stack, head, chunks)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_malformed_json_and_wrong_types_are_clear_4xx(stack: Stack) -> None:
    url = f"{stack.api_url}/v1/namespaces/fuzz-bad/transcripts"
    cases: list[tuple[bytes, dict[str, str]]] = [
        (b"{not json", {"content-type": "application/json"}),
        (b"\xff\xfe\x00garbage", {"content-type": "application/json"}),
        (json.dumps({"turns": "nope"}).encode(), {"content-type": "application/json"}),
        (json.dumps({"turns": []}).encode(), {"content-type": "application/json"}),
        (json.dumps({"turns": [{"role": "wizard", "content": "x"}]}).encode(), {"content-type": "application/json"}),
        (
            json.dumps({"turns": [{"role": "user", "content": "x"}], "occurred_at": "2026-01-01T00:00:00"}).encode(),
            {"content-type": "application/json"},
        ),
        (json.dumps([1, 2, 3]).encode(), {"content-type": "application/json"}),
        (b"turns=1", {"content-type": "application/x-www-form-urlencoded"}),
    ]
    for body, headers in cases:
        r = httpx.post(url, content=body, headers=headers, timeout=30)
        assert 400 <= r.status_code < 500, (body[:80], r.status_code, r.text[:300])
        assert _clear_rejection(r) is None, (body[:80], r.text[:300])
    bad_ns = httpx.post(
        f"{stack.api_url}/v1/namespaces/{'x' * 300}/transcripts",
        json={"turns": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert bad_ns.status_code == 422, bad_ns.text
