"""The Celery app, configured for at-least-once delivery over Redis.

- acks_late + task_reject_on_worker_lost: a message is acknowledged only after its task finished, so a
  killed worker's task is redelivered; tasks are idempotent (Postgres state), so redelivery is safe.
- prefetch 1: a worker holds at most one unacknowledged message per process.
- visibility_timeout longer than the slowest task: Redis redelivers only what was really lost; retry
  countdowns stay under half of it.
- worker_proc_alive_timeout: a child replacing a killed one loads the embedding model before it reports
  ready; Celery's 4 s default is too short on a busy machine and turns one crash into a dead pool.
- One beat process schedules the periodic jobs; their database locks make a second beat harmless.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from hindsight.broker import resolve_redis_url
from hindsight.config import Settings, get_settings
from workers import broker_qos

broker_qos.install()

TASK_MODULES = ["workers.tasks", "workers.signals"]


def celery_config(settings: Settings) -> dict[str, object]:
    """Celery's configuration from hindsight's settings (the broker is resolved here: the configured Redis, or
    the local stack's embedded one if it runs; nothing is started)."""
    return {
        "broker_url": resolve_redis_url(settings),
        "task_default_queue": "hindsight",
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "task_ignore_result": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "worker_prefetch_multiplier": 1,
        "worker_proc_alive_timeout": settings.worker.process_start_timeout_seconds,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_transport_options": {"visibility_timeout": settings.worker.visibility_timeout_seconds},
        "beat_schedule": {
            "lifecycle": {"task": "lifecycle.run", "schedule": settings.beat.lifecycle_interval_seconds},
            "sweep": {"task": "transcripts.sweep", "schedule": settings.beat.sweep_interval_seconds},
            # Same cadence as the lifecycle; a run with nothing to rebuild reads a few index pages.
            "reindex": {"task": "memories.reindex", "schedule": settings.beat.lifecycle_interval_seconds},
            # Same cadence: a run with nothing to build counts the big namespaces (one index-only scan a table).
            "tenant-indexes": {"task": "indexes.tenants", "schedule": settings.beat.lifecycle_interval_seconds},
            "idle-sessions": {
                "task": "sessions.close_idle",
                "schedule": settings.beat.idle_sessions_interval_seconds,
            },
        },
        "timezone": "UTC",
        "enable_utc": True,
    }


def create_app(settings: Settings) -> Celery:
    """An app for these settings, configured now (senders with settings of their own: the stack, tests)."""
    app = Celery("hindsight", include=TASK_MODULES)
    app.conf.update(celery_config(settings))
    return app


@lru_cache(maxsize=1)
def get_app() -> Celery:
    """The process's app. Its configuration (and so the broker) is resolved from get_settings() when it is
    first needed, not at import: importing this module starts nothing."""
    app = Celery("hindsight", include=TASK_MODULES)
    app.add_defaults(lambda: celery_config(get_settings()))
    return app


app = get_app()
