"""Erase leaves no trace: a canary planted through a real transcript (distilled by the real worker), a
manual write and a subject's key is searched for, after the erase, in EVERY column of EVERY table and in
the JSON-lines log file."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.api.conftest import AuthApi


def _tables(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema='public' AND table_type='BASE TABLE'"
                )
            ).scalars()
        )


def _rows_with(engine: sa.Engine, needle: str) -> dict[str, int]:
    """Every table, every column: the whole row cast to text (text, varchar, jsonb, tsvector, arrays...)."""
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for table in _tables(engine):
            n = conn.execute(
                sa.text(f'SELECT count(*) FROM "{table}" t WHERE lower(t::text) LIKE :p'), {"p": f"%{needle.lower()}%"}
            ).scalar_one()
            if n:
                found[table] = n
    return found


def _log_lines_with(path: Path, needle: str) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if needle.lower() in line.lower()]


def _distilled(client: httpx.Client, ns: str, tid: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.get(f"/v1/namespaces/{ns}/transcripts/{tid}").json()["state"]
        if state == "done":
            return
        assert state != "dead"
        time.sleep(0.3)
    raise AssertionError(f"transcript {tid} not distilled in {timeout}s")


def test_erase_leaves_no_trace_of_the_canary(auth_api: AuthApi, alpha: httpx.Client, alpha_ns: str, engine) -> None:
    canary = "Qzx" + uuid.uuid4().hex[:10]
    base = f"/v1/namespaces/{alpha_ns}"
    r = alpha.post(
        f"{base}/transcripts",
        json={
            "turns": [
                {"role": "user", "content": f"I work at {canary} Labs as a data engineer."},
                {"role": "assistant", "content": f"Noted, {canary} Labs it is."},
                {"role": "user", "content": "I prefer tea over coffee."},
            ]
        },
    )
    assert r.status_code == 202, r.text
    tid = r.json()["id"]
    _distilled(alpha, alpha_ns, tid)
    items = alpha.get(f"{base}/memories").json()["items"]
    planted = [m for m in items if canary.lower() in m["value"].lower()]
    tea = [m for m in items if "tea" in m["value"]]
    assert len(planted) == 1, items
    assert len(tea) == 1
    # The canary is also verified and refreshed, so it sits in audit history under several actions.
    alpha.post(f"{base}/memories/{planted[0]['id']}/verify")
    assert alpha.get(f"{base}/search", params={"q": f"{canary} Labs", "min_score": 0}).json()["hits"]

    log_file = auth_api.services.data_dir / "hindsight.jsonl"
    before = _rows_with(engine, canary)
    assert {"memories", "transcripts", "episodes", "rounds", "memory_audit"} <= set(before), before

    r = alpha.delete(f"{base}/memories/{planted[0]['id']}")
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["memory_ids"] == [planted[0]["id"]]
    assert result["turns_redacted"] >= 2, "the cited turn and the assistant's echo"
    assert result["episodes_redacted"] == 1
    assert result["rounds_erased"] == 1, "the round of the cited turn and its echo"

    assert _rows_with(engine, canary) == {}  # episodes' search_text included
    assert _log_lines_with(log_file, canary) == []
    episode_hits = alpha.get(f"{base}/episodes/search", params={"q": f"{canary} Labs"}).json()["hits"]
    assert all(canary.lower() not in h["episode"]["summary"].lower() for h in episode_hits)
    assert all(h["keyword"] == 0 for h in episode_hits)

    # What is left: a tombstone without content, an `erased` audit record, the rest of the namespace.
    assert alpha.get(f"{base}/memories/{planted[0]['id']}").status_code == 404
    assert alpha.delete(f"{base}/memories/{planted[0]['id']}").status_code == 404
    with engine.connect() as conn:
        tomb = (
            conn.execute(sa.text("SELECT * FROM memory_tombstones WHERE memory_id=:m"), {"m": planted[0]["id"]})
            .mappings()
            .one()
        )
        actions = list(
            conn.execute(
                sa.text("SELECT action FROM memory_audit WHERE memory_id=:m ORDER BY id"), {"m": planted[0]["id"]}
            ).scalars()
        )
    assert tomb["namespace"] == alpha_ns
    assert tomb["scope"] == "memory"
    assert tomb["actor"].startswith("api/token:")
    assert actions[0] == "created"
    assert actions[-1] == "erased"
    assert "verified" in actions
    assert alpha.get(f"{base}/memories/{tea[0]['id']}").json()["value"] == tea[0]["value"]
    assert not alpha.get(f"{base}/search", params={"q": f"{canary} Labs", "min_score": 0}).json()["hits"] or all(
        canary.lower() not in h["memory"]["value"].lower()
        for h in alpha.get(f"{base}/search", params={"q": f"{canary} Labs", "min_score": 0}).json()["hits"]
    )
    status = alpha.get(f"{base}/transcripts/{tid}").json()
    assert status["state"] == "done"
    # The round of the turn that did not mention the canary is still there.
    [tea_round] = alpha.get(f"{base}/rounds/search", params={"q": "tea or coffee", "top_k": 5}).json()["hits"]
    assert tea_round["round"]["text"] == "user: I prefer tea over coffee."


def test_erase_a_subject_removes_all_its_memories_and_their_log_lines(
    auth_api: AuthApi, alpha: httpx.Client, alpha_ns: str, engine
) -> None:
    person = "qzx" + uuid.uuid4().hex[:8]
    base = f"/v1/namespaces/{alpha_ns}"
    ids = []
    for attr, value in (("role", f"{person} is the team's SRE"), ("city", f"{person} lives in Oslo")):
        r = alpha.post(
            f"{base}/memories", json={"key": f"colleague:{person}.{attr}", "value": value, "kind": "relationship"}
        )
        assert r.status_code == 201, r.text
        ids.append(r.json()["memory"]["id"])
    keep = alpha.post(f"{base}/memories", json={"key": "user.city", "value": "User lives in Bergen"}).json()["memory"]
    log_file = auth_api.services.data_dir / "hindsight.jsonl"
    assert _log_lines_with(log_file, person), "the writes logged the subject's key"

    r = alpha.post(f"{base}/erase", json={"key_prefix": f"colleague:{person}."})
    assert r.status_code == 200, r.text
    assert sorted(r.json()["memory_ids"]) == sorted(ids)
    assert r.json()["log_lines_scrubbed"] >= 2
    assert _rows_with(engine, person) == {}
    assert _log_lines_with(log_file, person) == []
    for mid in ids:
        assert any(mid in line for line in log_file.read_text().splitlines()), "lines stay, without content"
    assert alpha.get(f"{base}/memories/{keep['id']}").status_code == 200
    with engine.connect() as conn:
        scopes = set(
            conn.execute(sa.text("SELECT scope FROM memory_tombstones WHERE namespace=:n"), {"n": alpha_ns}).scalars()
        )
    assert scopes == {"subject"}


def test_the_log_file_is_rewritten_in_place_without_the_erased_text(tmp_path: Path) -> None:
    from hindsight.services.erase import scrub_log_file

    mid, other = uuid.uuid4(), uuid.uuid4()
    path = tmp_path / "h.jsonl"
    lines = [
        f'{{"event": "memory.created", "memory_id": "{mid}", "key": "colleague:zed.city", "namespace": "n"}}',
        f'{{"event": "memory.refreshed", "memory_id": "{other}", "candidate": "Zed said \\"hi\\"\\nthere"}}',
        f'{{"event": "memory.created", "memory_id": "{other}", "key": "user.tea"}}',
        "plain text line mentioning Zed said",
    ]
    path.write_text("\n".join(lines) + "\n")
    appender = path.open("a")  # a process appending to the file keeps writing to the same file
    changed = scrub_log_file(path, [mid], ['Zed said "hi"\nthere', "Zed said"])
    appender.write('{"event": "after"}\n')
    appender.close()
    out = path.read_text().splitlines()
    assert changed == 3
    assert json.loads(out[0]) == {"event": "memory.created", "memory_id": str(mid), "namespace": "n", "erased": True}
    assert json.loads(out[1])["candidate"] == "[erased]"
    assert out[2] == lines[2], "untouched lines are kept byte for byte"
    assert out[3] == "plain text line mentioning [erased]"
    assert out[4] == '{"event": "after"}'


def test_audit_history_stays_append_only_after_an_erase(alpha: httpx.Client, alpha_ns: str, engine) -> None:
    mid = alpha.post(f"/v1/namespaces/{alpha_ns}/memories", json={"key": "user.x", "value": "User likes kites"}).json()
    assert alpha.delete(f"/v1/namespaces/{alpha_ns}/memories/{mid['memory']['id']}").status_code == 200
    with engine.connect() as conn, conn.begin(), pytest.raises(sa.exc.DBAPIError, match="append-only"):
        conn.execute(sa.text("UPDATE memory_audit SET actor='x' WHERE namespace=:n"), {"n": alpha_ns})
