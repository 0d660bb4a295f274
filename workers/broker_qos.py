"""A Redis channel that can be closed after its connection.

When a worker loses Redis, Celery tears the connection down, and kombu may close a channel after the connection's
transport has already let go of its client (kombu 5.7: `Connection._close` clears `transport.client`, then a channel
that is still open closes). Closing a channel restores the messages it had delivered but not acknowledged, and the
restore builds a Redis client from `transport.client`, which is now None: `AttributeError: 'NoneType' object has no
attribute 'hostname'`. That error is no connection error to Celery, so it stopped the worker (seen about once in ten
runs of the fault suite's "Redis killed and restarted empty").

Nothing is lost by not restoring there: each delivered message is also in the broker's `unacked` hash (kombu writes
it there before handing the message out), which the next worker hands out again after the visibility timeout, and
the beat's sweeper re-sends any transcript that PostgreSQL still holds unfinished. So the restore is skipped, with a
warning, when there is no connection left to restore through.
"""

from __future__ import annotations

from typing import Any

import structlog
from kombu.transport import redis as kombu_redis

log = structlog.get_logger(__name__)


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        delivered: Any = self._delivered
        if client is None and getattr(self.channel.connection, "client", None) is None:
            log.warning(
                "broker.restore_skipped",
                delivered=len(delivered),
                reason="the connection closed before its channel; the messages stay in the unacked hash",
            )
            delivered.clear()
            return None
        return super().restore_unacked(client)


def install() -> None:
    """Use this QoS for every Redis channel of the process (both URL forms Celery is given, redis:// and
    redis+socket://, pick kombu's own redis transport by name, so its channel class is where this goes)."""
    kombu_redis.Channel.QoS = QoS
