"""A Publisher (hindsight.queue) for service tests that run no worker: it records the ids it was handed after
the commit and sends nothing, as `send=lambda ids: 0` did before the publisher was injected."""

from __future__ import annotations

import uuid
from collections.abc import Iterable


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[uuid.UUID] = []

    def send_distill(self, transcript_ids: Iterable[uuid.UUID]) -> int:
        ids = list(transcript_ids)
        self.sent.extend(ids)
        return len(ids)
