"""What a suite runs on: PostgreSQL+pgvector, Redis and a Celery worker, started here or already running.

By default the harness starts its own embedded PostgreSQL and Redis in a scratch directory (as
`hindsight up` does), migrates, and spawns `python -m hindsight.cli worker`; with `external=True` it uses
the configured servers and a worker that is already running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from sqlalchemy import Engine

from hindsight.config import Settings
from hindsight.queue import Publisher
from schemas.events import TranscriptIn


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    console: Console
    worker: subprocess.Popen[bytes] | None = None
    worker_log: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    _publisher: Publisher | None = None

    @property
    def publisher(self) -> Publisher:
        """Sends distill tasks to this runtime's Redis (which may not be the process-wide default)."""
        if self._publisher is None:
            from workers.publisher import CeleryPublisher

            self._publisher = CeleryPublisher.for_settings(self.settings)
        return self._publisher

    def check_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is not None:
            tail = self.worker_log.read_text(errors="replace")[-3000:] if self.worker_log else ""
            raise RuntimeError(f"the eval worker exited with {self.worker.returncode}:\n{tail}")

    def publish_and_wait(
        self,
        events: Sequence[TranscriptIn],
        *,
        timeout: float = 600,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[uuid.UUID]:
        """Publish transcripts (committed, then queued) and wait until each is done or dead."""
        from hindsight.db.engine import read_session, session_scope
        from hindsight.db.repositories import TranscriptRepository
        from hindsight.services.ingest import publish_transcripts

        with session_scope(self.engine) as session:
            accepted = publish_transcripts(session, events, publisher=self.publisher, settings=self.settings)
        ids = [a.id for a in accepted]
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            self.check_worker()
            with read_session(self.engine) as session:
                done = TranscriptRepository(session).count_finished(ids)
            if on_progress is not None:
                on_progress(done)
            if done >= len(ids):
                return ids
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(ids) - done} of {len(ids)} transcripts were not distilled within {timeout:.0f} s; "
                    "is a worker running on this Redis?"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)


def _wait_worker_ready(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the eval worker exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}"
            )
        if log.exists() and "worker.ready" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the eval worker was not ready within {timeout:.0f} s; see {log}")


def _interrupted(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _stop_on_sigterm() -> signal.Handlers | Callable[[int, FrameType | None], Any] | int | None:
    """Make SIGTERM end the run as Ctrl-C does, so that the servers and the worker it started are stopped on the way
    out (by default SIGTERM ends Python at once and leaves them running). Returns the handler it replaced, or None
    where signals cannot be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupted)


@contextmanager
def eval_runtime(
    settings: Settings,
    *,
    console: Console,
    external: bool = False,
    data_dir: Path | None = None,
    concurrency: int | None = None,
    keep: bool = False,
) -> Iterator[Runtime]:
    """Yield a Runtime; everything it started is stopped (and its scratch directory removed) on exit."""
    from hindsight.db import migrate
    from hindsight.db.engine import get_engine, resolve_database_url
    from hindsight.readiness import wait_for_services

    if external:
        url = resolve_database_url(settings)
        settings = settings.model_copy(update={"database_url": url})
        wait_for_services(settings, timeout=30)
        yield Runtime(settings=settings, engine=get_engine(settings), console=console)
        return

    from hindsight.local_servers import start_postgres, start_redis, stop_postgres

    scratch = Path(tempfile.mkdtemp(prefix="hindsight-eval-")) if data_dir is None else data_dir
    scratch.mkdir(parents=True, exist_ok=True)
    pg_dir = scratch / "pg"
    redis = None
    worker = None
    previous = _stop_on_sigterm()
    try:
        with console.status("starting an embedded PostgreSQL (pgvector) and Redis…"):
            db_url = start_postgres(pg_dir)
            redis = start_redis(scratch / "redis", persist=False)
            migrate.upgrade(db_url)
        settings = settings.model_copy(update={"database_url": db_url, "redis_url": redis.url, "data_dir": scratch})
        env = {
            **os.environ,
            "HINDSIGHT_DATABASE_URL": db_url,
            "HINDSIGHT_REDIS_URL": redis.url,
            "HINDSIGHT_DATA_DIR": str(scratch),
            "HINDSIGHT_LOG_JSON": "true",
        }
        log = scratch / "worker.log"
        args = [sys.executable, "-m", "hindsight.cli", "worker"]
        if concurrency:
            args += ["-c", str(concurrency)]
        worker = subprocess.Popen(args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        with console.status("starting a worker (loads the embedding model)…"):
            _wait_worker_ready(worker, log, timeout=180)
        yield Runtime(
            settings=settings, engine=get_engine(settings), console=console, worker=worker, worker_log=log, env=env
        )
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        if redis is not None:
            redis.stop()
        stop_postgres(pg_dir)
        if data_dir is None and not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
