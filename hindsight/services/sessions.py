"""Live sessions in Redis: turn appends, a turn-threshold event every `max_turns` turns, conversation end.

Per session, Redis holds the turns not yet handed to the pipeline (`pending`), a bounded window of recent
turns (working memory), and a sequence counter. Pending turns leave Redis only after the transcript that
carries them is committed to PostgreSQL (idempotency key = session + turn range + digest), so a crash between
the two repeats the hand-over instead of losing turns.

A turn is redacted by the ingest helper (services.ingest.stored_turn) before anything reaches Redis, and is
held to the ingest limits (services.ingest.check_limits): a turn ingest would refuse is refused at append,
and pending is flushed before it would stop being a transcript ingest accepts, so it stays bounded. A
transcript that still can never be published is dead-lettered in PostgreSQL with its turns. Until one or
the other happens, pending and its counter carry no TTL: nothing expires unpublished.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis
import structlog
from sqlalchemy import Engine

from hindsight.broker import redis_client
from hindsight.config import LimitSettings, Settings, WorkingMemorySettings
from hindsight.db.engine import session_scope
from hindsight.errors import InvalidInput, PermanentError, TransientError
from hindsight.queue import Publisher
from hindsight.services.ingest import check_limits, dead_letter_transcript, publish_transcript, stored_turn
from schemas.events import EventType, Namespace, TranscriptAccepted, TranscriptIn, TurnIn
from schemas.pipeline import Role

log = structlog.get_logger(__name__)

ACTIVE_SESSIONS = "hs:sessions"
_SEP = "\x1f"

Publish = Callable[[TranscriptIn], Any]
DeadLetter = Callable[[TranscriptIn, str], Any]
_MAX_TURN_ID = 128  # TurnIn.turn_id
_MAX_KEY_SESSION_ID = 200  # keeps the idempotency key within its 256 characters; the digest covers the rest


def _namespace_prefix(namespace: str) -> str:
    return f"hs:sess:{namespace}{_SEP}"


def session_key(namespace: str, session_id: str, part: str) -> str:
    """The Redis key of one part of a session: `lock`, `seq` (its turn counter), `pending` or `window`."""
    return f"{_namespace_prefix(namespace)}{session_id}:{part}"


def active_member(namespace: str, session_id: str) -> str:
    """The session's member in the ACTIVE_SESSIONS sorted set (scored by its last turn's time)."""
    return f"{namespace}{_SEP}{session_id}"


def session_store(
    settings: Settings, *, redis_url: str, publisher: Publisher, engine: Engine | None = None
) -> SessionStore:
    """The store the API and beat use: publishes through ingest, dead-letters through ingest.

    It takes an engine, not a session: each hand-over is a unit of work of its own, committed before the turns
    leave Redis, and a store outlives many of them (default engine: get_engine())."""

    def publish(event: TranscriptIn) -> TranscriptAccepted:
        with session_scope(engine) as session:
            return publish_transcript(session, event, publisher=publisher, settings=settings)

    def dead_letter(event: TranscriptIn, reason: str) -> TranscriptAccepted:
        with session_scope(engine) as session:
            return dead_letter_transcript(session, event, reason, settings=settings)

    return SessionStore(
        redis=redis_client(redis_url),
        settings=settings.working_memory,
        publish=publish,
        limits=settings.limits,
        dead_letter=dead_letter,
    )


def _default_turn_id(session_id: str, seq: int) -> str:
    turn_id = f"{session_id}:{seq}"
    # A long session id must not make the turn unpublishable (turn ids are at most 128 characters).
    return turn_id if len(turn_id) <= _MAX_TURN_ID else f"seq:{seq}"


def _transcript_turns(session_id: str, records: Sequence[dict[str, Any]]) -> list[TurnIn]:
    # Validated when appended; not again now: a redaction marker may have made a name or an id longer
    # than TurnIn allows, which ingest (storing the same redacted text) accepts.
    return [
        TurnIn.model_construct(
            role=Role(r["role"]),
            content=r["content"],
            name=r.get("name"),
            turn_id=r.get("turn_id") or _default_turn_id(session_id, r["seq"]),
        )
        for r in records
    ]


def _retry_later(event: TranscriptIn, step: str, exc: Exception) -> TransientError:
    # The cause goes to the log only: the message may reach an HTTP caller (503).
    log.warning(
        "session.hand_over_failed",
        namespace=event.namespace,
        session_id=event.conversation_id,
        step=step,
        error=f"{type(exc).__name__}: {exc}"[:500],
    )
    return TransientError(f"session {event.conversation_id}: {step} failed ({type(exc).__name__}); retried later")


def _idempotency_key(session_id: str, records: Sequence[dict[str, Any]]) -> str:
    """The same pending turns give the same key, so a retried hand-over is stored once. The digest tells
    apart a session id reused after its counter expired (seq starts again at 1) and ids that redaction of
    the stored key would make equal."""
    digest = hashlib.sha256(
        json.dumps([session_id, list(records)], ensure_ascii=False, sort_keys=True).encode("utf-8")
    ).hexdigest()[:16]
    first, last = records[0]["seq"], records[-1]["seq"]
    return f"session:{session_id[:_MAX_KEY_SESSION_ID]}:{first}-{last}:{digest}"


@dataclass
class SessionStore:
    redis: redis.Redis
    settings: WorkingMemorySettings
    publish: Publish
    """Stores a transcript durably and notifies the queue (services.ingest.publish_transcript)."""
    limits: LimitSettings = field(default_factory=LimitSettings)
    """The ingest limits (settings.limits): pending must always be a transcript ingest accepts."""
    dead_letter: DeadLetter | None = None
    """Stores a transcript that can never be published, dead, with the reason (ingest.dead_letter_transcript).
    Without one, such a session stays pending (retried and logged by end and close_idle)."""

    def append(self, namespace: Namespace, session_id: str, turn: TurnIn, *, now: float | None = None) -> bool:
        """Append one turn. Returns True when this append handed pending turns to the pipeline.

        Raises InvalidInput for a turn ingest would refuse, and TransientError when pending had to be handed
        over first and could not be; either way nothing is stored. Once the turn is stored, a failed
        turn-threshold hand-over is only logged: end() and close_idle retry it."""
        now = now or time.time()
        with self.redis.lock(session_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
            seq = int(self.redis.get(session_key(namespace, session_id, "seq")) or 0) + 1
            record = self._admit(namespace, session_id, turn, seq)
            flushed = self._make_room(namespace, session_id, record)
            self._store(namespace, session_id, record, now)
            if seq % self.settings.max_turns == 0:
                flushed = self._try_flush(namespace, session_id) or flushed
        return flushed

    def _admit(self, namespace: str, session_id: str, turn: TurnIn, seq: int) -> dict[str, Any]:
        """The turn as Redis will hold it (redacted, with its seq); InvalidInput when ingest would refuse it."""
        check_limits(TranscriptIn(namespace=namespace, turns=[turn]), self.limits)
        stored, _ = stored_turn(turn, turn.turn_id or _default_turn_id(session_id, seq))
        record = {"seq": seq, **stored}
        # Checked again as it will be published: a redaction marker can be longer than what it replaced.
        check_limits(self._transcript(namespace, session_id, [record], EventType.turn_threshold), self.limits)
        return record

    def _make_room(self, namespace: str, session_id: str, record: dict[str, Any]) -> bool:
        """Hand pending over first when adding `record` would make a transcript ingest refuses (too many
        turns or bytes, a repeated turn id), so pending stays within the ingest limits. True if it did."""
        pending = [json.loads(r) for r in self.redis.lrange(session_key(namespace, session_id, "pending"), 0, -1)]
        if not pending:
            return False
        try:
            check_limits(
                self._transcript(namespace, session_id, [*pending, record], EventType.turn_threshold), self.limits
            )
            return False
        except InvalidInput:
            return self._flush(namespace, session_id, EventType.turn_threshold)

    def _store(self, namespace: str, session_id: str, record: dict[str, Any], now: float) -> None:
        data = json.dumps(record, ensure_ascii=False)
        window = session_key(namespace, session_id, "window")
        pipe = self.redis.pipeline()  # MULTI/EXEC: the turn is stored whole or not at all
        pipe.set(session_key(namespace, session_id, "seq"), record["seq"])  # SET also drops a TTL left by a flush
        pipe.rpush(session_key(namespace, session_id, "pending"), data)
        # Pending never expires: it leaves Redis only when published or dead-lettered (see _flush).
        pipe.persist(session_key(namespace, session_id, "pending"))
        pipe.rpush(window, data)
        pipe.ltrim(window, -self.settings.max_turns, -1)
        pipe.expire(window, self.settings.ttl_seconds)
        pipe.zadd(ACTIVE_SESSIONS, {active_member(namespace, session_id): now})
        pipe.execute()

    def _try_flush(self, namespace: str, session_id: str) -> bool:
        try:
            return self._flush(namespace, session_id, EventType.turn_threshold)
        except Exception as exc:  # the turn is stored: end() or beat's close_idle hands it over later
            log.warning(
                "session.flush_failed",
                namespace=namespace,
                session_id=session_id,
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
            return False

    def end(self, namespace: Namespace, session_id: str) -> bool:
        """Explicit conversation end: hand the remaining turns to the pipeline. True if any were pending."""
        with self.redis.lock(session_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
            sent = self._flush(namespace, session_id, EventType.conversation_end)
            self.redis.zrem(ACTIVE_SESSIONS, active_member(namespace, session_id))
        return sent

    def window(self, namespace: Namespace, session_id: str) -> list[dict[str, Any]]:
        """Working memory: the last `max_turns` turns, trimmed to `max_tokens` (approx. 4 chars a token)."""
        turns = [json.loads(r) for r in self.redis.lrange(session_key(namespace, session_id, "window"), 0, -1)]
        budget = self.settings.max_tokens * 4
        kept: list[dict[str, Any]] = []
        for turn in reversed(turns):
            budget -= len(turn["content"])
            if budget < 0 and kept:
                break
            kept.append(turn)
        return list(reversed(kept))

    def exists(self, namespace: Namespace, session_id: str) -> bool:
        """True while the session has working memory: until `ttl_seconds` after its last turn."""
        return bool(self.redis.exists(session_key(namespace, session_id, "window")))

    def close_idle(self, *, idle_seconds: float, now: float | None = None) -> int:
        """Publish a conversation-end for every session idle longer than `idle_seconds` (beat).

        A session that fails is logged and left in place (retried on the next run); it never keeps the
        sessions after it from being closed."""
        now = now or time.time()
        closed = 0
        for member in self.redis.zrangebyscore(ACTIVE_SESSIONS, "-inf", now - idle_seconds):
            name = member.decode() if isinstance(member, bytes) else str(member)
            try:
                namespace, session_id = name.split(_SEP, 1)
                closed += self.end(namespace, session_id)
            except Exception as exc:
                log.warning("session.close_failed", session=name, error=f"{type(exc).__name__}: {exc}"[:500])
        if closed:
            log.info("sessions.closed_idle", count=closed)
        return closed

    def _transcript(
        self, namespace: str, session_id: str, records: Sequence[dict[str, Any]], event_type: EventType
    ) -> TranscriptIn:
        return TranscriptIn(
            namespace=namespace,
            conversation_id=session_id,
            event_type=event_type,
            turns=_transcript_turns(session_id, records),
            occurred_at=datetime.now(UTC),
            idempotency_key=_idempotency_key(session_id, records),
        )

    def _hand_over(self, event: TranscriptIn) -> None:
        """Publish; a transcript ingest refuses for good is dead-lettered with its turns instead. Anything
        else is a TransientError, and the turns stay pending for the next try."""
        try:
            self.publish(event)
            return
        except (PermanentError, ValueError) as exc:  # ValueError: a pydantic ValidationError
            if self.dead_letter is None:
                raise
            reason = f"session {event.conversation_id} could not be published: {type(exc).__name__}: {exc}"
        except Exception as exc:
            raise _retry_later(event, "publishing", exc) from exc
        try:
            self.dead_letter(event, reason[:2000])
        except Exception as exc:
            raise _retry_later(event, "dead-lettering", exc) from exc
        log.warning(
            "session.dead_lettered",
            namespace=event.namespace,
            session_id=event.conversation_id,
            turns=len(event.turns),
            reason=reason[:500],
        )

    def _flush(self, namespace: str, session_id: str, event_type: EventType) -> bool:
        pending_key = session_key(namespace, session_id, "pending")
        raw = self.redis.lrange(pending_key, 0, -1)
        if not raw:
            return False
        records = [json.loads(r) for r in raw]
        self._hand_over(self._transcript(namespace, session_id, records, event_type))
        # Only now, with the transcript committed (or dead-lettered), do the turns leave Redis; the counter
        # then lives as long as the window, so a seq is not reused while the window still shows it.
        pipe = self.redis.pipeline()
        pipe.ltrim(pending_key, len(raw), -1)
        pipe.expire(session_key(namespace, session_id, "seq"), self.settings.ttl_seconds)
        pipe.execute()
        log.info(
            "session.flushed",
            namespace=namespace,
            session_id=session_id,
            event_type=event_type.value,
            turns=len(raw),
        )
        return True

    # -- erase (hindsight.services.erase) -------------------------------------------------------------------

    def erase_namespace(self, namespace: Namespace) -> int:
        """Drop every session of the namespace, turns not yet handed over included. Returns how many."""
        sessions = self._session_ids(namespace)
        for session_id in sessions:
            with self.redis.lock(session_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
                self.redis.delete(*(session_key(namespace, session_id, part) for part in ("seq", "pending", "window")))
                self.redis.zrem(ACTIVE_SESSIONS, active_member(namespace, session_id))
        return len(sessions)

    def erase_matching(self, namespace: Namespace, needles: Sequence[str], replacement: str = "[erased]") -> int:
        """Redact every turn of the namespace's sessions that contains a needle (case-insensitive), in the
        window and in the turns still pending hand-over, so the text is neither served as working memory nor
        distilled later. The sequence counter stays: a later hand-over must not reuse an idempotency key.
        Returns how many turns were redacted."""
        lowered = [n.lower() for n in needles if n]
        if not lowered:
            return 0
        redacted: set[tuple[str, int]] = set()
        for session_id in self._session_ids(namespace):
            with self.redis.lock(session_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
                for part in ("pending", "window"):
                    seqs = self._redact_list(session_key(namespace, session_id, part), lowered, replacement)
                    redacted |= {(session_id, seq) for seq in seqs}
        return len(redacted)

    def _redact_list(self, key: str, lowered: Sequence[str], replacement: str) -> list[int]:
        records = [json.loads(r) for r in self.redis.lrange(key, 0, -1)]
        hits = [
            r for r in records if any(n in f"{r.get('content', '')}\n{r.get('name') or ''}".lower() for n in lowered)
        ]
        if not hits:
            return []
        for r in hits:
            r["content"] = replacement
            r.pop("name", None)
        ttl = int(self.redis.ttl(key))
        pipe = self.redis.pipeline()  # MULTI/EXEC: readers never see the list half rewritten
        pipe.delete(key)
        pipe.rpush(key, *(json.dumps(r, ensure_ascii=False) for r in records))
        if ttl > 0:
            pipe.expire(key, ttl)
        pipe.execute()
        return [int(r["seq"]) for r in hits]

    def _session_ids(self, namespace: str) -> list[str]:
        prefix = _namespace_prefix(namespace)
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"
        ids: set[str] = set()
        for raw in self.redis.scan_iter(match=pattern, count=500):
            name = raw.decode() if isinstance(raw, bytes) else raw
            ids.add(name[len(prefix) :].rsplit(":", 1)[0])
        return sorted(ids)
