"""Ingest at the edge: validation, limits, idempotency, redaction, and file parsing that stores all or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hindsight.config import Settings
from hindsight.db.engine import session_scope
from hindsight.errors import InvalidInput
from hindsight.services.ingest import parse_event, publish_transcripts, read_events_file
from schemas.events import TranscriptAccepted, TranscriptIn
from tests.fakes.publisher import RecordingPublisher


def _publish(
    events: list[TranscriptIn], publisher: RecordingPublisher, settings: Settings | None = None
) -> list[TranscriptAccepted]:
    """Publish in one unit of work, as the API and the CLI do: sent (recorded) only after the commit."""
    before = list(publisher.sent)
    with session_scope() as session:
        accepted = publish_transcripts(session, events, publisher=publisher, settings=settings)
        assert publisher.sent == before  # nothing is sent before the commit
    return accepted


def _event(ns: str, **kw):
    data = {
        "namespace": ns,
        "conversation_id": "c1",
        "turns": [{"role": "user", "content": "I prefer tea over coffee."}],
    }
    data.update(kw)
    return data


def _count(engine, namespace: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM transcripts WHERE namespace=:n"), {"n": namespace}).scalar()


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"turns": []}, "turns"),
        ({"turns": [{"role": "robot", "content": "hi"}]}, "turns.0.role"),
        ({"turns": [{"role": "user", "content": "   "}]}, "blank"),
        ({"turns": [{"role": "user", "content": "a\x00b"}]}, "NUL"),
        ({"namespace": ""}, "namespace"),
        ({"namespace": "../etc"}, "namespace"),
        ({"occurred_at": "2026-01-01T00:00:00"}, "timezone"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_events_are_rejected_with_a_clear_error(namespace: str, patch: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_event(_event(namespace, **patch))


def test_missing_namespace_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="namespace: Field required"):
        parse_event({"turns": [{"role": "user", "content": "hi"}]})


def test_accepted_once_per_idempotency_key_and_sent_after_commit(services, engine, namespace: str) -> None:
    rec = RecordingPublisher()
    first = _publish([parse_event(_event(namespace))], rec)
    again = _publish([parse_event(_event(namespace))], rec)
    assert not first[0].duplicate
    assert again[0].duplicate
    assert first[0].id == again[0].id
    assert rec.sent == [first[0].id]  # the duplicate sends nothing
    assert _count(engine, namespace) == 1


def test_limits_reject_oversized_transcripts_and_store_nothing(services, engine, namespace: str) -> None:
    limits = {"max_turn_chars": 50, "max_turns_per_transcript": 3}
    settings = Settings(limits=limits)  # type: ignore[arg-type]  # a dict: pydantic merges it with the env; the plugin types only the model
    rec = RecordingPublisher()
    with pytest.raises(InvalidInput, match="limit is 50"):
        _publish([parse_event(_event(namespace, turns=[{"role": "user", "content": "x" * 51}]))], rec, settings)
    with pytest.raises(InvalidInput, match="4 turns; the limit is 3"):
        _publish([parse_event(_event(namespace, turns=[{"role": "user", "content": "hi"}] * 4))], rec, settings)
    assert _count(engine, namespace) == 0
    assert rec.sent == []


def test_secrets_are_redacted_before_storage(services, engine, namespace: str) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    ev = _event(namespace, turns=[{"role": "user", "content": f"my openai key is {key} keep it safe"}])
    _publish([parse_event(ev)], RecordingPublisher())
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT turns::text, redactions::text FROM transcripts WHERE namespace=:n"),
            {"n": namespace},
        ).one()
    assert key not in stored[0]
    assert "REDACTED" in stored[0]
    assert stored[1] != "[]"


def test_file_ingest_names_the_bad_line_and_stores_nothing(services, engine, namespace: str, tmp_path: Path) -> None:
    good = json.dumps(_event(namespace))
    path = tmp_path / "t.jsonl"
    path.write_text(good + "\n" + '{"namespace": "x", "turns": [{"role": "alien", "content": "hi"}]}\n')
    with pytest.raises(InvalidInput, match=r"t\.jsonl:2: .*role"):
        read_events_file(str(path))
    path.write_text(good + "\n{not json\n")
    with pytest.raises(InvalidInput, match=r"t\.jsonl:2: invalid JSON"):
        read_events_file(str(path))
    path.write_bytes(good.encode() + b"\n" + b'{"namespace": "\xff\xfe"}\n')
    with pytest.raises(InvalidInput, match=r"t\.jsonl:2: invalid UTF-8"):
        read_events_file(str(path))
    assert _count(engine, namespace) == 0


def test_file_ingest_reads_json_list_and_jsonl(tmp_path: Path, namespace: str) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps([_event(namespace), _event(namespace, conversation_id="c2")]))
    assert [e.conversation_id for e in read_events_file(str(a))] == ["c1", "c2"]
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps(_event("other")) + "\n\n" + json.dumps(_event("other", conversation_id="c2")) + "\n")
    events = read_events_file(str(b), namespace=namespace)
    assert [e.namespace for e in events] == [namespace, namespace]
