"""A worker's Redis channel closed after its connection (kombu's teardown order on a lost broker) must neither
raise nor lose the messages it holds unacknowledged: they stay in the broker's `unacked` hash for redelivery."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer, Producer
from kombu.transport import redis as kombu_redis

from hindsight.broker import redis_client
from tests.conftest import Services
from workers import broker_qos


@pytest.fixture
def delivered(services: Services) -> Iterator[tuple[Connection, object, Message]]:
    """A channel that has delivered one message, not acknowledged, on the test run's real Redis."""
    import workers.celery_app  # noqa: F401  (the worker's app installs the QoS on import)

    conn = Connection(services.redis_url)
    channel = conn.channel()
    name = f"qos-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name), name, channel=channel)
    queue.declare()
    Producer(channel).publish({"n": 1}, exchange=name, routing_key=name, declare=[queue])
    got: list[Message] = []
    consumer = Consumer(channel, [queue], callbacks=[lambda _body, message: got.append(message)])
    consumer.consume()
    conn.drain_events(timeout=5)
    assert len(got) == 1
    try:
        yield conn, channel, got[0]
    finally:
        redis_client(services.redis_url).hdel("unacked", got[0].delivery_tag)
        conn.release()


def _unacked(services: Services, tag: str) -> bool:
    return redis_client(services.redis_url).hexists("unacked", tag)


def test_the_worker_app_installs_the_qos() -> None:
    import workers.celery_app  # noqa: F401

    assert kombu_redis.Channel.QoS is broker_qos.QoS


def test_a_channel_closed_after_its_connection_keeps_its_messages_for_redelivery(
    services: Services, delivered: tuple[Connection, object, Message]
) -> None:
    conn, channel, message = delivered
    assert _unacked(services, message.delivery_tag)
    conn.transport.client = None  # what Connection._close does before a channel still open is closed
    channel.close()  # type: ignore[attr-defined]
    assert _unacked(services, message.delivery_tag)


def test_kombus_own_qos_raises_there(
    services: Services, delivered: tuple[Connection, object, Message], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure the QoS exists for (so the test above is about something): kombu's own restore needs the
    connection's client."""
    conn, channel, message = delivered
    stock = kombu_redis.QoS(channel)
    held: Any = stock._delivered
    held[message.delivery_tag] = message
    monkeypatch.setattr(channel, "_qos", stock)
    conn.transport.client = None
    with pytest.raises(AttributeError, match="hostname"):
        channel.close()  # type: ignore[attr-defined]
