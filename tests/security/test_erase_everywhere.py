"""Security issue #10, finding 7: an erase reaches every copy of the erased person, not only the
provenance of their memories. A canary person is planted through two real transcripts (one that yields a
memory, one that only names them, both distilled by the real worker), a working-memory session and the log
lines the stack writes; after an erase by subject, EVERY table, EVERY Redis value and every log file the
product writes (settings.log_file and settings.process_log_dir, where the test stack's processes log, as
`hindsight up`'s do) are searched for it. Transcript and namespace erase are tested through the API, the
Python client and the CLI."""

from __future__ import annotations

import random
import string
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from hindsight.broker import redis_client
from hindsight.client import MemoryClient
from hindsight.errors import InvalidInput
from tests.api.conftest import AuthApi, alpha, alpha_ns, auth_api  # noqa: F401 - fixtures
from tests.api.test_erase import _distilled, _rows_with
from tests.conftest import Services


def _canary() -> str:
    # Letters only: the person must be found by the name in their key, not by an identifier's digits.
    return "Qzx" + "".join(random.choices(string.ascii_lowercase, k=7))


def _key() -> str:
    # Words, not hex: a long hex digest reads as a secret to the ingest redactor.
    return "key-" + "".join(random.choices(string.ascii_lowercase, k=12))


def _log_files(services: Services) -> list[Path]:
    """Every log file the product writes under the test settings: the JSON-lines log file and the process
    logs (the session stack's worker, beat and APIs run with their output there)."""
    return [services.data_dir / "hindsight.jsonl", *sorted((services.data_dir / "logs").glob("*.log"))]


def _log_lines_with(services: Services, needle: str) -> list[str]:
    found = []
    for path in _log_files(services):
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        found += [f"{path.name}: {line}" for line in text.splitlines() if needle.lower() in line.lower()]
    return found


def _redis_keys_with(services: Services, needle: str) -> list[str]:
    """Every key of every type whose name or value contains the needle."""
    client = redis_client(services.redis_url)
    readers = {
        b"string": lambda k: [client.get(k)],
        b"list": lambda k: client.lrange(k, 0, -1),
        b"hash": lambda k: [x for kv in client.hgetall(k).items() for x in kv],
        b"set": lambda k: list(client.smembers(k)),
        b"zset": lambda k: client.zrange(k, 0, -1),
        b"stream": lambda k: [str(e).encode() for e in client.xrange(k)],
    }
    found = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        values = [key, *readers.get(kind, lambda _k: [])(key)]
        if any(needle.lower().encode() in (v or b"").lower() for v in values):
            found.append(key.decode(errors="replace"))
    return found


def _settled(engine: sa.Engine, ns: str, timeout: float = 90) -> None:
    """Every transcript of the namespace distilled (a session's hand-over included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            states = list(
                conn.execute(sa.text("SELECT state FROM transcripts WHERE namespace=:n"), {"n": ns}).scalars()
            )
        assert "dead" not in states
        if states and all(s == "done" for s in states):
            return
        time.sleep(0.3)
    raise AssertionError(f"transcripts of {ns} not distilled in {timeout}s")


def _post(client: httpx.Client, ns: str, *turns: tuple[str, str]) -> str:
    body = {"turns": [{"role": role, "content": c} for role, c in turns], "idempotency_key": _key()}
    r = client.post(f"/v1/namespaces/{ns}/transcripts", json=body)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def test_erase_by_subject_reaches_every_copy_of_the_person(
    auth_api: AuthApi,  # noqa: F811
    alpha: httpx.Client,  # noqa: F811
    alpha_ns: str,  # noqa: F811
    engine: sa.Engine,
) -> None:
    name = _canary()
    base = f"/v1/namespaces/{alpha_ns}"
    services = auth_api.services
    # One conversation yields a memory about the person; the other only names them.
    t1 = _post(alpha, alpha_ns, ("user", f"My colleague {name} lives in Oslo."), ("user", "I prefer tea over coffee."))
    t2 = _post(
        alpha,
        alpha_ns,
        ("user", f"I had lunch with {name} yesterday, we talked about the offsite."),
        ("assistant", f"Sounds good, say hi to {name} from me."),
        ("user", "What should I cook tonight?"),
    )
    for tid in (t1, t2):
        _distilled(alpha, alpha_ns, tid)
    # Working memory: a live session names the person too; ended, its turns are also a transcript.
    for content in (f"Remind me to call {name} tomorrow.", "And buy milk."):
        assert alpha.post(f"{base}/sessions/s1/turns", json={"role": "user", "content": content}).status_code == 200
    alpha.post(f"{base}/sessions/s1/end")
    _settled(engine, alpha_ns)
    items = alpha.get(f"{base}/memories").json()["items"]
    planted = sorted(m["id"] for m in items if m["key"].startswith(f"colleague:{name.lower()}"))
    tea = [m for m in items if "tea" in m["value"]]
    assert planted, items
    assert tea
    assert name in str(alpha.get(f"{base}/sessions/s1").json())
    # The endpoints find the person before; a search is logged (the access log), the erase must cut it.
    assert name.lower() in alpha.get(f"{base}/context", params={"q": f"lunch with {name}"}).text.lower()
    before = _rows_with(engine, name)
    assert {"memories", "transcripts", "episodes", "memory_audit"} <= set(before), before
    assert _redis_keys_with(services, name)
    assert _log_lines_with(services, name)

    r = alpha.post(f"{base}/erase", json={"subject": f"colleague:{name.lower()}"})
    assert r.status_code == 200, r.text
    result = r.json()
    assert sorted(result["memory_ids"]) == planted
    assert result["transcripts_redacted"] >= 2, "the cited one and the one that only names them"
    assert result["episodes_redacted"] >= 2
    assert result["sessions_scrubbed"] >= 1

    # Every table, every Redis value, every log file, before anything asks for the name again.
    assert _rows_with(engine, name) == {}
    assert _redis_keys_with(services, name) == []
    assert _log_lines_with(services, name) == []

    assert name.lower() not in alpha.get(f"{base}/context", params={"q": f"lunch with {name}"}).text.lower()
    hits = alpha.get(f"{base}/episodes/search", params={"q": f"lunch with {name}"}).json()["hits"]
    assert all(name.lower() not in str(h).lower() for h in hits)
    window = alpha.get(f"{base}/sessions/s1").json()["turns"]
    assert [t["content"] for t in window] == ["[erased]", "And buy milk."], "the rest of the session stays"
    assert alpha.get(f"{base}/memories/{tea[0]['id']}").status_code == 200
    assert alpha.get(f"{base}/transcripts/{t2}").json()["state"] == "done"


def _sources(engine: sa.Engine, ns: str) -> dict[str, set[str]]:
    """Each memory of the namespace: the transcripts its provenance cites."""
    out: dict[str, set[str]] = {}
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT m.id, p.transcript_id FROM memories m JOIN memory_provenance p ON p.memory_id = m.id "
                "WHERE m.namespace = :n"
            ),
            {"n": ns},
        )
        for mid, tid in rows:
            out.setdefault(str(mid), set()).add(str(tid))
    return out


def test_erase_one_transcript_over_the_api(
    alpha: httpx.Client,  # noqa: F811
    alpha_ns: str,  # noqa: F811
    engine: sa.Engine,
) -> None:
    name = _canary()
    base = f"/v1/namespaces/{alpha_ns}"
    gone = _post(alpha, alpha_ns, ("user", f"My colleague {name} lives in Oslo."), ("user", "I use Fedora Linux."))
    _distilled(alpha, alpha_ns, gone)
    kept = _post(alpha, alpha_ns, ("user", "I use Fedora Linux."))
    _distilled(alpha, alpha_ns, kept)
    items = alpha.get(f"{base}/memories").json()["items"]
    sources = _sources(engine, alpha_ns)
    person = [m["id"] for m in items if m["key"].startswith(f"colleague:{name.lower()}")]
    only_gone = [mid for mid, src in sources.items() if src == {gone}]
    shared = [mid for mid, src in sources.items() if src == {gone, kept}]
    assert set(person) <= set(only_gone)
    assert shared, ("a fact both transcripts taught", items, sources)

    assert alpha.delete(f"{base}/transcripts/{uuid.uuid4()}").status_code == 404
    r = alpha.delete(f"{base}/transcripts/{gone}")
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["scope"] == "transcript"
    assert (result["transcripts_erased"], result["episodes_erased"], result["rounds_erased"]) == (1, 1, 2)
    assert sorted(result["memory_ids"]) == sorted(only_gone), "only what this transcript alone taught"

    assert alpha.get(f"{base}/transcripts/{gone}").status_code == 404
    assert _rows_with(engine, name) == {}
    assert _sources(engine, alpha_ns) == {m: {kept} for m in shared}, "kept, without the erased provenance"
    with engine.connect() as conn:
        scopes = conn.execute(sa.text("SELECT scope FROM memory_tombstones WHERE namespace=:n"), {"n": alpha_ns})
        assert set(scopes.scalars()) == {"transcript"}
        assert conn.execute(sa.text("SELECT count(*) FROM episodes WHERE transcript_id=:t"), {"t": gone}).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM rounds WHERE transcript_id=:t"), {"t": gone}).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM rounds WHERE transcript_id=:t"), {"t": kept}).scalar() == 1


def test_erase_a_whole_namespace_with_the_python_client(
    auth_api: AuthApi,  # noqa: F811
    alpha_ns: str,  # noqa: F811
    engine: sa.Engine,
) -> None:
    name = _canary()
    services = auth_api.services
    memory = MemoryClient(auth_api.url, token="tok-alpha", namespace=alpha_ns)
    memory.remember(f"My colleague {name} plays the cello.")
    turns = [{"role": "user", "content": f"I met {name} at the station."}]
    tid = memory.publish_transcript(turns, idempotency_key=_key())["id"]
    deadline = time.monotonic() + 90
    while memory.transcript_status(tid)["state"] != "done" and time.monotonic() < deadline:
        time.sleep(0.3)
    memory.append_working_memory("s1", "user", f"{name} is late again.")
    assert _rows_with(engine, name)

    with pytest.raises(InvalidInput):
        memory.erase_namespace(confirm=alpha_ns + "-typo")
    result = memory.erase_namespace(confirm=alpha_ns)
    assert result["scope"] == "namespace"
    assert result["transcripts_erased"] == 1
    assert result["sessions_scrubbed"] == 1

    assert _rows_with(engine, name) == {}
    assert _redis_keys_with(services, alpha_ns) == []
    assert _log_lines_with(services, name) == []
    with engine.connect() as conn:
        for table in ("memories", "transcripts", "episodes"):
            n = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE namespace=:n"), {"n": alpha_ns}).scalar()
            assert n == 0, table
        details = conn.execute(
            sa.text("SELECT DISTINCT detail::text FROM memory_audit WHERE namespace=:n AND action <> 'erased'"),
            {"n": alpha_ns},
        ).scalars()
        assert list(details) == ['{"erased": true}'], "the audit keeps that things happened, not what"
        tombs = conn.execute(sa.text("SELECT scope FROM memory_tombstones WHERE namespace=:n"), {"n": alpha_ns})
        assert set(tombs.scalars()) == {"namespace"}
    assert memory.list()["total"] == 0


def _printed(stdout: str) -> dict[str, Any]:
    import json

    [line] = [x for x in stdout.splitlines() if x.startswith("{")]
    return json.loads(line)


def test_the_cli_erases_a_transcript_and_a_namespace(services: Services, engine: sa.Engine, tmp_path: Path) -> None:
    import json

    from hindsight.cli import app

    runner = CliRunner()
    ns = f"cli-{uuid.uuid4().hex[:10]}"
    path = tmp_path / "t.jsonl"
    lines = [
        {"conversation_id": c, "idempotency_key": c, "turns": [{"role": "user", "content": f"I use Fedora {c}."}]}
        for c in "ab"
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ingested = runner.invoke(app, ["ingest", str(path), "--namespace", ns])
    assert ingested.exit_code == 0, ingested.output
    ids = [json.loads(x)["id"] for x in ingested.stdout.splitlines() if x.startswith("{")]

    assert runner.invoke(app, ["erase", ns]).exit_code == 2, "one of the scopes must be named"
    r = runner.invoke(app, ["erase", ns, "--transcript", ids[0]])
    assert r.exit_code == 0, r.output
    assert _printed(r.stdout)["transcripts_erased"] == 1, r.stdout
    refused = runner.invoke(app, ["erase", ns, "--all"])
    assert refused.exit_code == 2
    assert "--confirm" in refused.output
    r = runner.invoke(app, ["erase", ns, "--all", "--confirm", ns])
    assert r.exit_code == 0, r.output
    assert _printed(r.stdout)["transcripts_erased"] == 1, (r.stdout, ids)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM transcripts WHERE namespace=:n"), {"n": ns}).scalar() == 0
