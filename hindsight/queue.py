"""What the services need from the queue: a Publisher. Postgres holds the work; a message only says where to look.

The core names the messages and never imports a transport: the Celery implementation lives with the workers
(workers/publisher.py), and the API, the CLI, the eval harness and the tests hand one in.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol

DISTILL_TASK = "distill.transcript"
"""The task a distill message names (workers/tasks.py registers it)."""


class Publisher(Protocol):
    """Sends notifications onto the queue. Services call it only after the rows are committed
    (`hindsight.db.engine.after_commit`)."""

    def send_distill(self, transcript_ids: Iterable[uuid.UUID]) -> int:
        """Send one distill task per id; returns how many were sent."""
        ...
