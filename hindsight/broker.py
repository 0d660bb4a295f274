"""Redis connection helpers shared by the Celery app, the session store, readiness checks and the API."""

from __future__ import annotations

from typing import Any

from hindsight.config import Settings


def resolve_redis_url(settings: Settings) -> str:
    """The configured Redis, or the embedded one in data_dir/redis (started if it is not running)."""
    if settings.redis_url:
        return settings.redis_url
    from hindsight.embedded import start_redis

    sock = (settings.data_dir / "redis" / "redis.sock").resolve()
    if sock.exists():
        import redis

        try:
            redis.Redis(unix_socket_path=str(sock)).ping()
            return f"redis+socket://{sock}"
        except redis.RedisError:
            pass
    return start_redis(settings.data_dir / "redis").url


def redis_client(url: str) -> Any:
    """A redis-py client for a Celery-style URL (redis://, rediss://, redis+socket://, unix://)."""
    import redis

    if url.startswith("redis+socket://"):
        path = url[len("redis+socket://") :].split("?", 1)[0]
        return redis.Redis(unix_socket_path=path)
    return redis.Redis.from_url(url)
