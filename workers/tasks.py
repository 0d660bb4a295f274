"""Thin Celery tasks: ids in, the unit of work and retries here, the logic in hindsight.services."""

from __future__ import annotations

import random
import uuid
from datetime import datetime
from functools import lru_cache
from typing import Any

import structlog
from celery import Task
from sqlalchemy.exc import DBAPIError, OperationalError

from hindsight.broker import resolve_redis_url
from hindsight.collaborators import Clients, build_clients
from hindsight.config import get_settings
from hindsight.db import tenant_indexes
from hindsight.db.engine import get_engine, session_scope
from hindsight.errors import NotFound, PermanentError, TransientError
from hindsight.services import distill, lifecycle, reindex
from hindsight.services.sessions import session_store
from workers.celery_app import app
from workers.publisher import CeleryPublisher

log = structlog.get_logger(__name__)


@lru_cache(maxsize=1)
def get_clients() -> Clients:
    """Built once per worker process (the embedding model loads once per child)."""
    return build_clients(get_settings())


def _countdown(retries: int) -> float:
    settings = get_settings().worker
    cap = min(settings.retry_backoff_max_seconds, settings.visibility_timeout_seconds / 2)
    base = min(cap, 2.0 ** (retries + 1))
    return base / 2 + random.uniform(0, base / 2)  # "equal jitter"


class HindsightTask(Task):
    acks_late = True
    reject_on_worker_lost = True
    max_retries = None  # attempts are counted in Postgres (worker.max_attempts), not in the message


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, OperationalError | DBAPIError):
        return bool(getattr(exc, "connection_invalidated", False)) or isinstance(exc, OperationalError)
    import redis

    return isinstance(exc, redis.ConnectionError | redis.TimeoutError | ConnectionError | TimeoutError)


@app.task(name="distill.transcript", bind=True, base=HindsightTask)
def distill_transcript(self: Task, transcript_id: str) -> dict[str, Any]:
    """Distill one accepted transcript (idempotent: a done transcript is skipped)."""
    settings = get_settings()
    tid = uuid.UUID(transcript_id)
    structlog.contextvars.bind_contextvars(task_id=self.request.id, transcript_id=transcript_id)
    engine = get_engine(settings)
    try:
        outcome = distill.distill_transcript(tid, clients=get_clients(), engine=engine)
        return {"status": outcome.status, "ops": outcome.ops}
    except NotFound as exc:
        log.warning("distill.transcript.not_found", error=str(exc))
        return {"status": "not_found"}
    except Exception as exc:
        # Bad data (our PermanentError, a validation error) will fail the same way again: dead-letter now.
        # Anything else is retried with backoff until worker.max_attempts are used up.
        permanent = isinstance(exc, PermanentError | ValueError) and not _is_transient(exc)
        error = f"{type(exc).__name__}: {exc}"
        log.warning("distill.transcript.failed", error=error, permanent=permanent)
        try:
            with session_scope(engine) as session:
                dead = distill.record_failure(
                    session, tid, error, permanent=permanent, max_attempts=settings.worker.max_attempts
                )
        except Exception:  # the database itself is down: leave the row for the sweeper
            log.exception("distill.transcript.record_failure_failed")
            raise self.retry(countdown=_countdown(self.request.retries), exc=exc) from None
        if dead:
            return {"status": "dead", "error": error}
        raise self.retry(countdown=_countdown(self.request.retries), exc=exc) from None
    finally:
        structlog.contextvars.clear_contextvars()


@app.task(name="lifecycle.run", base=HindsightTask)
def run_lifecycle(now: str | None = None) -> dict[str, Any]:
    """Age memories. `now` (ISO 8601) lets operators and tests run the clock forward."""
    settings = get_settings()
    at = datetime.fromisoformat(now) if now else None
    with session_scope(get_engine(settings)) as session:
        report = lifecycle.run_lifecycle(session, settings.lifecycle, now=at)
    return {
        "skipped": report.skipped,
        "stale": report.stale,
        "archived": report.archived,
        "expired": report.expired,
    }


@app.task(name="memories.reindex", base=HindsightTask)
def reindex_memories() -> int:
    """Rebuild the search words of memories written with an older slot vocabulary (after an upgrade)."""
    return reindex.reindex_search_text(get_engine(get_settings())).rebuilt


@app.task(name="indexes.tenants", base=HindsightTask)
def maintain_tenant_indexes() -> dict[str, Any]:
    """Give big namespaces an HNSW index of their own; drop those of namespaces that shrank."""
    settings = get_settings()
    report = tenant_indexes.maintain_tenant_indexes(get_engine(settings), settings.retrieval)
    return {"created": len(report.created), "dropped": len(report.dropped), "kept": report.kept}


@app.task(name="transcripts.sweep", base=HindsightTask)
def sweep_transcripts() -> int:
    """Re-send accepted transcripts whose message was lost or whose worker died."""
    settings = get_settings()
    with session_scope(get_engine(settings)) as session:
        ids = lifecycle.sweep_stuck_transcripts(session, settings.worker)
    for tid in ids:  # the claim is committed: a lost message is claimed again by a later sweep
        distill_transcript.delay(str(tid))
    return len(ids)


@app.task(name="sessions.close_idle", base=HindsightTask)
def close_idle_sessions() -> int:
    """Publish a conversation-end event for every session idle past working_memory.idle_close_seconds."""
    settings = get_settings()
    store = session_store(settings, redis_url=resolve_redis_url(settings), publisher=CeleryPublisher(app))
    return store.close_idle(idle_seconds=settings.working_memory.idle_close_seconds)
