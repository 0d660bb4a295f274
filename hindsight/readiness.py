"""Wait for PostgreSQL and Redis at start-up, retrying with backoff (depends_on alone is not readiness)."""

from __future__ import annotations

import structlog
from sqlalchemy import create_engine, text
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from hindsight.config import Settings

log = structlog.get_logger(__name__)


def wait_for_services(settings: Settings, *, timeout: float, postgres: bool = True, redis: bool = True) -> None:
    """Block until the configured servers answer, or raise after `timeout` seconds.

    With no URL configured, the local stack's embedded server must already run in data_dir: NoServer is raised
    at once when it does not (nothing is started here, and there is nothing to wait for).
    """
    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.2, max=5),
        retry=retry_if_exception_type(Exception),
        reraise=True,
        before_sleep=lambda rs: log.info(
            "startup.waiting",
            attempt=rs.attempt_number,
            error=str(rs.outcome.exception() if rs.outcome else "")[:200],
        ),
    )
    if postgres and not settings.database_url:
        from hindsight.db.engine import resolve_database_url

        resolve_database_url(settings)
    if redis and not settings.redis_url:
        from hindsight.broker import resolve_redis_url

        resolve_redis_url(settings)
    if postgres and settings.database_url:
        engine = create_engine(settings.database_url, pool_pre_ping=True)
        try:
            for attempt in retrying:
                with attempt, engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    if redis and settings.redis_url:
        from hindsight.broker import redis_client

        client = redis_client(settings.redis_url)
        for attempt in retrying.copy():
            with attempt:
                client.ping()
    log.info("startup.dependencies_ready")
