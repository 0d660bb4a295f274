"""Process-level hooks: logging and the clients bundle are set up once per worker child."""

from __future__ import annotations

from typing import Any

import structlog
from celery.signals import beat_init, worker_process_init, worker_ready, worker_shutting_down

from hindsight.config import get_settings
from hindsight.logging import configure_logging

log = structlog.get_logger(__name__)


@worker_process_init.connect
def _init_worker_process(**_: Any) -> None:
    configure_logging(get_settings())
    from workers.tasks import get_clients

    clients = get_clients()  # load the embedding model now, not inside the first task
    log.info(
        "worker.process_ready",
        embedding_model=clients.embedder.name,
        embedding_threads=getattr(clients.embedder, "threads", None),
    )


@worker_ready.connect
def _worker_ready(**_: Any) -> None:
    log.info("worker.ready")


@worker_shutting_down.connect
def _worker_shutting_down(sig: str | None = None, **_: Any) -> None:
    log.info("worker.shutting_down", signal=sig)


@beat_init.connect
def _init_beat(**_: Any) -> None:
    configure_logging(get_settings())
    log.info("beat.ready")
