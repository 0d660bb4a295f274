"""Sending notifications onto the queue. Postgres holds the work; a message only says where to look."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

DISTILL_TASK = "distill.transcript"


def send_distill(transcript_ids: Iterable[uuid.UUID]) -> int:
    """Send one distill task per id (call only after the rows are committed)."""
    from workers.celery_app import get_app

    app = get_app()
    n = 0
    for tid in transcript_ids:
        app.send_task(DISTILL_TASK, args=[str(tid)])
        n += 1
    return n
