"""Live sessions in Redis: turn appends, a turn-threshold event every `max_turns` turns, conversation end.

Per session, Redis holds the turns not yet handed to the pipeline (`pending`), a bounded window of recent
turns (working memory), and a sequence counter. Pending turns leave Redis only after the transcript that
carries them is committed to PostgreSQL (idempotency key = session + turn range), so a crash between the
two repeats the hand-over instead of losing turns.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
import structlog

from hindsight.config import WorkingMemorySettings
from schemas.events import EventType, Namespace, TranscriptIn, TurnIn

log = structlog.get_logger(__name__)

ACTIVE_SESSIONS = "hs:sessions"
_SEP = "\x1f"

Publish = Callable[[TranscriptIn], Any]


def _key(namespace: str, session_id: str, part: str) -> str:
    return f"hs:sess:{namespace}{_SEP}{session_id}:{part}"


@dataclass
class SessionStore:
    redis: redis.Redis
    settings: WorkingMemorySettings
    publish: Publish
    """Stores a transcript durably and notifies the queue (services.ingest.publish_transcript)."""

    def append(self, namespace: Namespace, session_id: str, turn: TurnIn, *, now: float | None = None) -> bool:
        """Append one turn. Returns True when this append fired a turn-threshold event."""
        now = now or time.time()
        with self.redis.lock(_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
            seq = int(self.redis.incr(_key(namespace, session_id, "seq")))
            record = json.dumps({"seq": seq, **turn.model_dump(exclude_none=True)}, ensure_ascii=False)
            pipe = self.redis.pipeline()
            pipe.rpush(_key(namespace, session_id, "pending"), record)
            pipe.rpush(_key(namespace, session_id, "window"), record)
            pipe.ltrim(_key(namespace, session_id, "window"), -self.settings.max_turns, -1)
            pipe.zadd(ACTIVE_SESSIONS, {f"{namespace}{_SEP}{session_id}": now})
            for part in ("seq", "pending", "window"):
                pipe.expire(_key(namespace, session_id, part), self.settings.ttl_seconds)
            pipe.execute()
            if seq % self.settings.max_turns == 0:
                self._flush(namespace, session_id, EventType.turn_threshold)
                return True
        return False

    def end(self, namespace: Namespace, session_id: str) -> bool:
        """Explicit conversation end: hand the remaining turns to the pipeline. True if any were pending."""
        with self.redis.lock(_key(namespace, session_id, "lock"), timeout=30, blocking_timeout=30):
            sent = self._flush(namespace, session_id, EventType.conversation_end)
            self.redis.zrem(ACTIVE_SESSIONS, f"{namespace}{_SEP}{session_id}")
        return sent

    def window(self, namespace: Namespace, session_id: str) -> list[dict[str, Any]]:
        """Working memory: the last `max_turns` turns, trimmed to `max_tokens` (approx. 4 chars a token)."""
        turns = [json.loads(r) for r in self.redis.lrange(_key(namespace, session_id, "window"), 0, -1)]
        budget = self.settings.max_tokens * 4
        kept: list[dict[str, Any]] = []
        for turn in reversed(turns):
            budget -= len(turn["content"])
            if budget < 0 and kept:
                break
            kept.append(turn)
        return list(reversed(kept))

    def close_idle(self, *, idle_seconds: float, now: float | None = None) -> int:
        """Publish a conversation-end for every session idle longer than `idle_seconds` (beat)."""
        now = now or time.time()
        closed = 0
        for member in self.redis.zrangebyscore(ACTIVE_SESSIONS, "-inf", now - idle_seconds):
            name = member.decode() if isinstance(member, bytes) else member
            namespace, session_id = name.split(_SEP, 1)
            if self.end(namespace, session_id):
                closed += 1
        if closed:
            log.info("sessions.closed_idle", count=closed)
        return closed

    def _flush(self, namespace: str, session_id: str, event_type: EventType) -> bool:
        pending_key = _key(namespace, session_id, "pending")
        raw = self.redis.lrange(pending_key, 0, -1)
        if not raw:
            return False
        records = [json.loads(r) for r in raw]
        first, last = records[0]["seq"], records[-1]["seq"]
        turns = [
            TurnIn(
                role=r["role"],
                content=r["content"],
                name=r.get("name"),
                turn_id=r.get("turn_id") or f"{session_id}:{r['seq']}",
            )
            for r in records
        ]
        self.publish(
            TranscriptIn(
                namespace=namespace,
                conversation_id=session_id,
                event_type=event_type,
                turns=turns,
                occurred_at=datetime.now(UTC),
                idempotency_key=f"session:{session_id}:{first}-{last}",
            )
        )
        # Only now, with the transcript committed, do the turns leave Redis.
        self.redis.ltrim(pending_key, len(raw), -1)
        log.info(
            "session.flushed",
            namespace=namespace,
            session_id=session_id,
            event_type=event_type.value,
            turns=len(raw),
        )
        return True
