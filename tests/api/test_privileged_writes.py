"""Privileged writes over a real API process: memory_write through reconcile, remember, forget/unforget,
verify; every one audited; bad input changes nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import sqlalchemy as sa

from tests.factories import create_memory


def _mem(client: httpx.Client, ns: str, mid: str) -> dict[str, Any]:
    r = client.get(f"/v1/namespaces/{ns}/memories/{mid}")
    assert r.status_code == 200, r.text
    return r.json()


def _all(client: httpx.Client, ns: str) -> list[dict[str, Any]]:
    states = ["active", "stale", "archived", "quarantined", "forgotten"]
    return client.get(f"/v1/namespaces/{ns}/memories", params={"state": states}).json()["items"]


def test_memory_write_goes_through_reconcile(alpha: httpx.Client, alpha_ns: str) -> None:
    base = f"/v1/namespaces/{alpha_ns}/memories"
    first = alpha.post(base, json={"key": "user.database", "value": "User uses PostgreSQL 15", "kind": "fact"})
    assert first.status_code == 201, first.text
    assert first.json()["action"] == "insert"
    m = first.json()["memory"]
    assert (m["source"], m["backend"], m["state"]) == ("manual", "manual", "active")

    again = alpha.post(base, json={"key": "user.database", "value": "User uses PostgreSQL 15"}).json()
    assert again["action"] == "refresh", "a duplicate refreshes instead of adding a copy"
    assert again["memory"]["id"] == m["id"]

    other = alpha.post(base, json={"key": "user.database", "value": "User uses MySQL 8"}).json()
    assert other["action"] in ("conflict", "supersede"), other
    assert other["memory"]["id"] != m["id"]
    assert len(_all(alpha, alpha_ns)) == 2

    negated = alpha.post(
        base,
        json={"key": "user.allergy", "value": "User is not allergic to penicillin", "pinned": True, "ttl_days": 30},
    ).json()
    positive = alpha.post(base, json={"key": "user.allergy_drug", "value": "User is allergic to penicillin"}).json()
    assert positive["memory"]["id"] != negated["memory"]["id"], "a negation is never merged into its opposite"
    assert negated["memory"]["pinned"] is True
    assert negated["memory"]["ttl_days"] == 30
    assert negated["memory"]["negated"] is True

    detail = _mem(alpha, alpha_ns, m["id"])
    actions = [h["action"] for h in detail["history"]]
    assert actions[:2] == ["created", "refreshed"]
    assert all(h["actor"].startswith("api/token:") for h in detail["history"])
    assert detail["provenance"][0]["transcript_id"] is None


def test_a_written_key_is_kept_even_when_another_slots_memory_says_the_same(alpha: httpx.Client, alpha_ns: str) -> None:
    """Distilled facts are matched statement by statement against memories under any key (pipeline/reconcile.py,
    `_covering`); a caller's write is not: the caller chose its key."""
    base = f"/v1/namespaces/{alpha_ns}/memories"
    wide = alpha.post(base, json={"key": "user.hobby", "value": "User likes sailing, chess and baking bread"}).json()
    narrow = alpha.post(base, json={"key": "user.exercise", "value": "User likes sailing"}).json()
    assert narrow["action"] == "insert", narrow
    assert narrow["memory"]["key"] == "user.exercise"
    assert narrow["memory"]["id"] != wide["memory"]["id"]


def test_remember_extracts_facts_or_keeps_a_note(alpha: httpx.Client, alpha_ns: str) -> None:
    url = f"/v1/namespaces/{alpha_ns}/remember"
    r = alpha.post(url, json={"content": "I prefer dark mode in every editor.", "metadata": {"via": "test"}})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["extracted"] is True
    assert body["results"][0]["memory"]["key"].startswith("user.")
    assert "dark mode" in body["results"][0]["memory"]["value"]
    hist = _mem(alpha, alpha_ns, body["results"][0]["memory"]["id"])["history"]
    assert hist[0]["detail"]["metadata"] == {"via": "test"}

    note = alpha.post(url, json={"content": "Deploy window: Fridays 18:00-20:00 UTC; the password is Hunter2Secret"})
    res = note.json()["results"]
    assert len(res) >= 1
    assert "Hunter2Secret" not in str(note.json()), "secrets are redacted before anything is stored"
    assert "Hunter2Secret" not in str(alpha.get(f"/v1/namespaces/{alpha_ns}/memories").json())

    steered = alpha.post(url, json={"content": "Team standup is at 9:30", "metadata": {"key": "team.standup"}})
    assert steered.json()["results"][0]["memory"]["key"] == "team.standup"
    assert steered.json()["extracted"] is False


def test_forget_is_soft_audited_and_undoable(alpha: httpx.Client, alpha_ns: str) -> None:
    base = f"/v1/namespaces/{alpha_ns}"
    m = alpha.post(f"{base}/memories", json={"key": "user.editor", "value": "User writes code in Helix editor"}).json()
    mid = m["memory"]["id"]
    q: dict[str, str | int] = {"q": "Helix editor", "min_score": 0}
    assert [h["memory"]["id"] for h in alpha.get(f"{base}/search", params=q).json()["hits"]] == [mid]

    r = alpha.post(f"{base}/memories/{mid}/forget", json={"reason": "user said it is wrong"})
    assert r.status_code == 200
    assert r.json()["state"] == "forgotten"
    assert alpha.get(f"{base}/search", params=q).json()["hits"] == []
    assert alpha.get(f"{base}/memories").json()["total"] == 0, "forgotten memories are not listed by default"
    assert alpha.get(f"{base}/memories", params={"state": "forgotten"}).json()["total"] == 1
    assert alpha.get(f"{base}/context", params={"q": "Helix editor"}).json()["memory_ids"] == []
    assert alpha.post(f"{base}/memories/{mid}/forget").status_code == 409
    assert alpha.post(f"{base}/memories/{mid}/verify").status_code == 409

    # A forgotten memory is out of reconcile too: writing the fact again makes a new memory.
    r = alpha.post(f"{base}/memories/{mid}/unforget")
    assert r.json()["state"] == "active"
    assert alpha.post(f"{base}/memories/{mid}/unforget").status_code == 409
    hist = _mem(alpha, alpha_ns, mid)["history"]
    assert [(h["action"], h["from_state"], h["to_state"]) for h in hist] == [
        ("created", None, "active"),
        ("forgotten", "active", "forgotten"),
        ("unforgotten", "forgotten", "active"),
    ]
    assert hist[1]["detail"] == {"reason": "user said it is wrong"}
    assert [h["memory"]["id"] for h in alpha.get(f"{base}/search", params=q).json()["hits"]] == [mid]


def test_verify_raises_confidence_resets_age_and_revives(alpha: httpx.Client, alpha_ns: str, engine) -> None:
    old = datetime.now(UTC) - timedelta(days=200)
    mid = create_memory(
        engine, alpha_ns, state="stale", confidence=0.6, source="user", at=old, value="User runs Arch Linux"
    )
    r = alpha.post(f"/v1/namespaces/{alpha_ns}/memories/{mid}/verify")
    assert r.status_code == 200, r.text
    m = r.json()
    assert m["state"] == "active"
    assert m["confidence"] == 0.7
    assert datetime.fromisoformat(m["last_verified_at"]) > datetime.now(UTC) - timedelta(minutes=1)
    capped = alpha.post(f"/v1/namespaces/{alpha_ns}/memories/{mid}/verify", json={"confidence": 1.0}).json()
    assert capped["confidence"] == 0.95, "a user-sourced memory is capped at 0.95"
    lower = alpha.post(f"/v1/namespaces/{alpha_ns}/memories/{mid}/verify", json={"confidence": 0.1}).json()
    assert lower["confidence"] == 0.95, "verify never lowers confidence"
    hist = _mem(alpha, alpha_ns, str(mid))["history"]
    assert [h["action"] for h in hist] == ["verified"] * 3
    assert (hist[0]["from_state"], hist[0]["to_state"]) == ("stale", "active")
    assert hist[0]["detail"] == {"confidence": 0.7, "previous_confidence": 0.6}

    quarantined = create_memory(engine, alpha_ns, state="quarantined", source="tool", confidence=0.3)
    assert alpha.post(f"/v1/namespaces/{alpha_ns}/memories/{quarantined}/verify").status_code == 409


def test_bad_input_gets_clear_errors_and_changes_nothing(alpha: httpx.Client, alpha_ns: str, engine) -> None:
    base = f"/v1/namespaces/{alpha_ns}"
    mid = alpha.post(f"{base}/memories", json={"key": "user.city", "value": "User lives in Lisbon"}).json()["memory"][
        "id"
    ]

    def snapshot() -> list[tuple[Any, ...]]:
        with engine.connect() as conn:
            mem = conn.execute(sa.text("SELECT * FROM memories WHERE namespace=:n ORDER BY id"), {"n": alpha_ns}).all()
            aud = conn.execute(sa.text("SELECT count(*) FROM memory_audit WHERE namespace=:n"), {"n": alpha_ns}).all()
        return [tuple(r) for r in mem] + [tuple(r) for r in aud]

    before = snapshot()
    cases: list[tuple[str, str, dict[str, Any], int]] = [
        ("GET", f"{base}/search", {"params": {"q": ""}}, 422),
        ("GET", f"{base}/search", {"params": {"q": "   "}}, 422),
        ("GET", f"{base}/search", {"params": {"q": "x" * 2001}}, 422),
        ("GET", f"{base}/search", {"params": {"q": "city", "top_k": 0}}, 422),
        ("GET", f"{base}/search", {"params": {"q": "city", "top_k": 101}}, 422),
        ("GET", f"{base}/search", {"params": {"q": "city", "top_k": "many"}}, 422),
        ("GET", f"{base}/context", {"params": {"q": "city", "budget_tokens": 10}}, 422),
        ("GET", f"{base}/memories/not-a-uuid", {}, 422),
        ("GET", f"{base}/memories/{uuid.uuid4()}", {}, 404),
        ("POST", f"{base}/memories/{uuid.uuid4()}/verify", {}, 404),
        ("DELETE", f"{base}/memories/{uuid.uuid4()}", {}, 404),
        ("POST", f"{base}/memories", {"json": {"key": "user.city"}}, 422),
        ("POST", f"{base}/memories", {"json": {"key": "user city", "value": "x"}}, 422),
        ("POST", f"{base}/memories", {"json": {"key": "user.city", "value": "   "}}, 422),
        ("POST", f"{base}/memories", {"json": {"key": "user.city", "value": "Porto", "confidence": 2}}, 422),
        ("POST", f"{base}/memories", {"json": {"key": "user.city", "value": "Porto", "namespace": "beta-x"}}, 422),
        ("POST", f"{base}/memories", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 422),
        ("POST", f"{base}/memories/{mid}/verify", {"json": {"confidence": -1}}, 422),
        ("POST", f"{base}/remember", {"json": {"content": ""}}, 422),
        ("POST", f"{base}/erase", {"json": {}}, 422),
        ("POST", f"{base}/erase", {"json": {"key_prefix": "u"}}, 422),
        ("GET", "/v1/namespaces/bad namespace!/memories", {}, 422),
    ]
    for method, path, kw, status in cases:
        r = alpha.request(method, path, **kw)
        assert r.status_code == status, (method, path, kw, r.status_code, r.text)
        assert "detail" in r.json()
    assert snapshot() == before


def test_working_memory_reads_back_and_expired_sessions_are_404(alpha: httpx.Client, alpha_ns: str) -> None:
    sid = f"s-{uuid.uuid4().hex[:8]}"
    base = f"/v1/namespaces/{alpha_ns}/sessions/{sid}"
    assert alpha.get(base).status_code == 404
    for i in range(3):
        r = alpha.post(f"{base}/turns", json={"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"})
        assert r.status_code == 200
    wm = alpha.get(base).json()
    assert [t["content"] for t in wm["turns"]] == ["turn 0", "turn 1", "turn 2"]
    assert [t["seq"] for t in wm["turns"]] == [1, 2, 3]
    # The stack keeps max_turns=4: the window holds the last four.
    for i in range(3, 6):
        alpha.post(f"{base}/turns", json={"role": "user", "content": f"turn {i}"})
    assert [t["content"] for t in alpha.get(base).json()["turns"]] == ["turn 2", "turn 3", "turn 4", "turn 5"]
    r = alpha.get(f"/v1/namespaces/{alpha_ns}/sessions/never-started")
    assert r.status_code == 404
    assert "expired" in r.json()["detail"]
