"""The Celery implementation of the core's Publisher (hindsight.queue)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from celery import Celery

from hindsight.config import Settings
from hindsight.queue import DISTILL_TASK


class CeleryPublisher:
    """Sends the core's messages as Celery tasks, on `app` (default: the process's app, workers.celery_app)."""

    def __init__(self, app: Celery | None = None) -> None:
        self._app = app

    @classmethod
    def for_settings(cls, settings: Settings) -> CeleryPublisher:
        """A publisher on these settings' broker (which may not be the process-wide default)."""
        from workers.celery_app import create_app

        return cls(create_app(settings))

    @property
    def app(self) -> Celery:
        if self._app is None:
            from workers.celery_app import get_app

            self._app = get_app()
        return self._app

    def send_distill(self, transcript_ids: Iterable[uuid.UUID]) -> int:
        n = 0
        for tid in transcript_ids:
            self.app.send_task(DISTILL_TASK, args=[str(tid)])
            n += 1
        return n
