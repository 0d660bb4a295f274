"""Accepting transcripts: validate at the edge, redact secrets, store; once the caller's unit of work commits,
notify the queue."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from hindsight.config import LimitSettings, Settings, get_settings
from hindsight.db.engine import Session, after_commit
from hindsight.db.repositories import TranscriptRepository
from hindsight.errors import InvalidInput
from hindsight.queue import Publisher
from hindsight.services.redaction import redact_identifier, redact_text
from pipeline.secrets import MARKER_RE, redact_secrets
from schemas.events import TranscriptAccepted, TranscriptIn, TurnIn

log = structlog.get_logger(__name__)


def parse_event(data: Any) -> TranscriptIn:
    """Validate a raw event (dict) into a TranscriptIn, with a readable error."""
    try:
        return TranscriptIn.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "event"
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "invalid transcript: " + "; ".join(parts) + more


def check_limits(event: TranscriptIn, limits: LimitSettings) -> None:
    if len(event.turns) > limits.max_turns_per_transcript:
        raise InvalidInput(f"transcript has {len(event.turns)} turns; the limit is {limits.max_turns_per_transcript}")
    total = 0
    for i, turn in enumerate(event.turns):
        if len(turn.content) > limits.max_turn_chars:
            raise InvalidInput(
                f"turns.{i}.content has {len(turn.content)} characters; the limit is {limits.max_turn_chars}"
            )
        total += len(turn.content.encode("utf-8"))
    if total > limits.max_transcript_bytes:
        raise InvalidInput(f"transcript is {total} bytes; the limit is {limits.max_transcript_bytes}")
    ids = [t.turn_id for t in event.turns if t.turn_id is not None]
    if len(ids) != len(set(ids)):
        raise InvalidInput("turn_id values must be unique within a transcript")


def idempotency_key(event: TranscriptIn) -> str:
    if event.idempotency_key:
        return event.idempotency_key
    digest = hashlib.sha256(
        json.dumps(
            [event.conversation_id, event.event_type.value, [t.model_dump() for t in event.turns]],
            ensure_ascii=False,
            sort_keys=True,
        ).encode("utf-8")
    ).hexdigest()
    return f"sha256:{digest}"


def stored_turn(turn: TurnIn, turn_id: str) -> tuple[dict[str, Any], list[str]]:
    """One turn as stored (here and in working memory): secrets redacted from its content, name and id."""
    red = redact_secrets(turn.content)
    stored: dict[str, Any] = {"turn_id": redact_identifier(turn_id), "role": turn.role.value, "content": red.text}
    if turn.name:
        stored["name"] = redact_text(turn.name)
    # A working-memory turn arrives redacted already: its markers still say what was there.
    return stored, sorted(set(red.kinds) | set(MARKER_RE.findall(turn.content)))


def _stored_turns(event: TranscriptIn) -> tuple[list[dict[str, Any]], list[str]]:
    """Turns as stored: secrets redacted before anything is written, turn ids filled in."""
    turns: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for i, turn in enumerate(event.turns):
        stored, found = stored_turn(turn, turn.turn_id if turn.turn_id is not None else str(i))
        kinds.update(found)
        turns.append(stored)
    return turns, sorted(kinds)


def store_transcript(
    session: Session, event: TranscriptIn, *, limits: LimitSettings, now: datetime, dead_reason: str | None = None
) -> tuple[uuid.UUID, bool]:
    """Insert the transcript unless its idempotency key was seen. Returns (id, created). No commit.

    With `dead_reason`, it is stored dead-lettered instead (limits unchecked: it may be why it is dead)."""
    if dead_reason is None:
        check_limits(event, limits)
    turns, kinds = _stored_turns(event)
    values = {
        "id": uuid.uuid4(),
        "namespace": event.namespace,
        "conversation_id": redact_identifier(event.conversation_id),
        "idempotency_key": redact_identifier(idempotency_key(event)),
        "event_type": event.event_type.value,
        "turns": turns,
        "occurred_at": event.occurred_at or now,
        "state": "accepted",
        "attempts": 0,
        "attempt_log": [],
        "redactions": kinds,
        "enqueued_at": now,
    }
    if dead_reason is not None:
        values.update(_dead_values(dead_reason, now))
    return TranscriptRepository(session).insert_if_new(values)


def _dead_values(reason: str, now: datetime) -> dict[str, Any]:
    # As the worker leaves a dead letter (distill.record_failure): `hindsight dead-letters` lists it and
    # `--requeue` sends it to distillation after a fix.
    return {
        "state": "dead",
        "last_error": reason[:2000],
        "attempt_log": [{"at": now.isoformat(), "attempt": 0, "error": reason[:500]}],
        "processed_at": now,
        "enqueued_at": None,
    }


def publish_transcripts(
    session: Session,
    events: Iterable[TranscriptIn],
    *,
    publisher: Publisher,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> list[TranscriptAccepted]:
    """Store the transcripts in the caller's unit of work; once it commits, send one distill task per new one."""
    settings = settings or get_settings()
    now = now or datetime.now(UTC)
    accepted: list[TranscriptAccepted] = []
    for event in events:
        tid, created = store_transcript(session, event, limits=settings.limits, now=now)
        accepted.append(TranscriptAccepted(id=tid, namespace=event.namespace, state="accepted", duplicate=not created))
    # After commit: a lost message only delays work (beat's sweeper re-sends it), never loses it.
    after_commit(session, lambda: _send_accepted(publisher, accepted))
    return accepted


def _send_accepted(publisher: Publisher, accepted: Sequence[TranscriptAccepted]) -> None:
    new_ids = [a.id for a in accepted if not a.duplicate]
    try:
        publisher.send_distill(new_ids)
    except Exception as exc:  # committed already: beat's sweeper sends them once the broker is back
        log.warning("transcript.send_failed", count=len(new_ids), error=f"{type(exc).__name__}: {exc}"[:300])
    for a in accepted:
        log.info("transcript.accepted", transcript_id=str(a.id), namespace=a.namespace, duplicate=a.duplicate)


def publish_transcript(
    session: Session,
    event: TranscriptIn | dict[str, Any],
    *,
    publisher: Publisher,
    settings: Settings | None = None,
) -> TranscriptAccepted:
    """Publish one conversation-end (or turn-threshold) event: the Python entry point for agents."""
    parsed = event if isinstance(event, TranscriptIn) else parse_event(event)
    return publish_transcripts(session, [parsed], publisher=publisher, settings=settings)[0]


def dead_letter_transcript(
    session: Session,
    event: TranscriptIn,
    reason: str,
    *,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> TranscriptAccepted:
    """Keep a transcript that can never be published (e.g. a session's pending turns) as a dead letter, its
    turns redacted as at ingest, so it is neither lost nor distilled until an operator re-queues it."""
    settings = settings or get_settings()
    now = now or datetime.now(UTC)
    tid, created = store_transcript(session, event, limits=settings.limits, now=now, dead_reason=reason)
    log.warning(
        "transcript.dead_lettered",
        transcript_id=str(tid),
        namespace=event.namespace,
        duplicate=not created,
        reason=reason[:500],
    )
    return TranscriptAccepted(id=tid, namespace=event.namespace, state="dead", duplicate=not created)


def read_events_file(path: str, *, namespace: str | None = None) -> list[TranscriptIn]:
    """Parse a JSON (object or list) or JSONL file of transcripts, naming the line of any problem.

    Nothing is stored unless every transcript in the file is valid.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad_line = raw[: exc.start].count(b"\n") + 1
        raise InvalidInput(f"{path}:{bad_line}: invalid UTF-8 (byte {exc.start})") from None

    items: list[tuple[int, Any]] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        items = [(0, d) for d in data]
    else:
        try:
            items = [(0, json.loads(text))] if stripped.startswith("{") and "\n{" not in stripped else []
        except json.JSONDecodeError:
            items = []
        if not items:
            for lineno, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    items.append((lineno, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise InvalidInput(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
    if not items:
        raise InvalidInput(f"{path}: no transcripts found")

    events: list[TranscriptIn] = []
    for idx, (lineno, item) in enumerate(items):
        where = f"{path}:{lineno}" if lineno else f"{path}[{idx}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}: expected a JSON object")
        if namespace is not None:
            item = {**item, "namespace": namespace}
        try:
            events.append(parse_event(item))
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
    return events
