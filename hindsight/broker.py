"""Redis connection helpers shared by the Celery app, the session store, readiness checks and the API."""

from __future__ import annotations

from typing import Any

from hindsight.config import Settings
from hindsight.errors import NoServer


def resolve_redis_url(settings: Settings) -> str:
    """The configured Redis, or the embedded one already running in data_dir/redis.

    Starts nothing: the embedded server is started only where asked for (`hindsight.local_servers`)."""
    if settings.redis_url:
        return settings.redis_url
    from hindsight.local_servers import running_redis

    url = running_redis(settings.data_dir / "redis")
    if url is None:
        raise NoServer(
            f"no Redis configured and no local stack running in {settings.data_dir}: "
            "run `hindsight up` or set HINDSIGHT_REDIS_URL"
        )
    return url


def redis_client(url: str) -> Any:
    """A redis-py client for a Celery-style URL (redis://, rediss://, redis+socket://, unix://)."""
    import redis

    if url.startswith("redis+socket://"):
        path = url[len("redis+socket://") :].split("?", 1)[0]
        return redis.Redis(unix_socket_path=path)
    return redis.Redis.from_url(url)
