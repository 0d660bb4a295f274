"""`hindsight up`: the local stack on embedded defaults, fed with sample conversations.

Starts (or uses, when URLs are configured) PostgreSQL with pgvector and Redis, migrates, runs a worker, a
beat and the API as child processes, publishes the bundled Chinese and English sample conversations, waits
until they are distilled and prints what was remembered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import Engine

from hindsight.config import Settings
from hindsight.files import PRIVATE_UMASK, open_private, private_dir
from hindsight.local_servers import EmbeddedRedis, start_postgres, start_redis, stop_postgres
from schemas.events import TranscriptIn


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    redis: EmbeddedRedis | None = None
    pg_dir: Path | None = None
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, name: str, *args: str) -> None:
        # The children's output (access log included) holds user text: 0600 in a 0700 folder, and what
        # the children create themselves (HINDSIGHT_LOG_FILE, say) is private through their umask.
        log_dir = private_dir(self.settings.process_log_dir)
        with open_private(log_dir / f"{name}.log", "ab") as log:
            self.children[name] = subprocess.Popen(
                [sys.executable, "-m", "hindsight.cli", *args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us once; we stop the children in order
                umask=PRIVATE_UMASK,
            )

    def check_children(self) -> None:
        for name, proc in self.children.items():
            if proc.poll() is not None:
                log = self.settings.process_log_dir / f"{name}.log"
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log}")

    def stop(self) -> None:
        for proc in self.children.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.children.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.redis is not None:
            self.redis.stop()
        if self.pg_dir is not None:
            stop_postgres(self.pg_dir)


def sample_events() -> list[TranscriptIn]:
    """The bundled Chinese and English sample conversations (devstack/samples/conversations.jsonl)."""
    from hindsight.services.ingest import read_events_file

    path = resources.files("devstack") / "samples" / "conversations.jsonl"
    with resources.as_file(path) as p:
        return read_events_file(str(p))


def run_stack(
    settings: Settings, *, feed_samples: bool, once: bool, timeout: float, console: Console, out: Console
) -> int:
    """Start the stack, feed it the samples, show what was remembered; returns the exit code."""
    from hindsight.db import migrate
    from hindsight.db.engine import get_engine, session_scope
    from hindsight.logging import configure_logging
    from workers.publisher import CeleryPublisher

    configure_logging(settings)
    private_dir(settings.data_dir)  # PostgreSQL's and Redis's data, the logs
    # Unbuffered children: their output reaches process_log_dir at once, where an erase can scrub it.
    stack = Stack(settings=settings, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    stop_requested = False

    def _on_signal(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        with console.status("starting PostgreSQL (pgvector) and Redis…"):
            db_url = settings.database_url
            if not db_url:
                stack.pg_dir = settings.data_dir / "pg"
                db_url = start_postgres(stack.pg_dir)
            redis_url = settings.redis_url
            if not redis_url:
                stack.redis = start_redis(settings.data_dir / "redis")
                redis_url = stack.redis.url
            stack.env.update({"HINDSIGHT_DATABASE_URL": db_url, "HINDSIGHT_REDIS_URL": redis_url})
            settings = settings.model_copy(update={"database_url": db_url, "redis_url": redis_url})
        console.print(f"[green]✓[/green] PostgreSQL  {_safe(db_url)}")
        console.print(f"[green]✓[/green] Redis       {redis_url}")
        with console.status("migrating…"):
            migrate.upgrade(db_url)
        console.print("[green]✓[/green] schema at head")

        stack.spawn("worker", "worker")
        stack.spawn("beat", "beat")
        stack.spawn("api", "api")
        base = f"http://{settings.api_host}:{settings.api_port}"
        _wait_ready(stack, base, console, deadline=time.monotonic() + 120)
        console.print(f"[green]✓[/green] worker, beat and API running — API {base}  (docs {base}/docs)")

        if feed_samples:
            events = sample_events()
            from hindsight.services.ingest import publish_transcripts

            engine = get_engine(settings)
            publisher = CeleryPublisher.for_settings(settings)
            # A namespace's conversations are sent in order, each round after the previous is distilled,
            # as they would arrive from a real agent over time.
            rounds: dict[str, int] = {}
            by_round: dict[int, list[TranscriptIn]] = {}
            for event in events:
                n = rounds[event.namespace] = rounds.get(event.namespace, -1) + 1
                by_round.setdefault(n, []).append(event)
            for batch in by_round.values():
                with session_scope(engine) as session:
                    accepted = publish_transcripts(session, batch, publisher=publisher, settings=settings)
                ids = [a.id for a in accepted]
                _wait_distilled(stack, engine, ids, console, timeout=timeout, stop=lambda: stop_requested)
            _show(engine, sorted({e.namespace for e in events}), out)
            out.print(
                f"\nAsk the API:  curl '{base}/v1/namespaces/{events[0].namespace}/search?q=database'\n"
                f"              curl '{base}/v1/namespaces/{events[0].namespace}/rounds/search?q=database'\n"
                f"Logs: {settings.process_log_dir}"
            )
        if once:
            return 0
        console.print("stack running; press Ctrl-C to stop")
        while not stop_requested:
            stack.check_children()
            time.sleep(0.5)
        return 0
    except RuntimeError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 1
    finally:
        with console.status("stopping…"):
            stack.stop()
        console.print("stopped")


def _safe(url: str) -> str:
    return url.split("@", 1)[-1] if "@" in url else url


def _wait_ready(stack: Stack, base: str, console: Console, *, deadline: float) -> None:
    with console.status("waiting for the API (loads the embedding model)…"):
        while time.monotonic() < deadline:
            stack.check_children()
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
    raise RuntimeError(f"the API at {base} was not ready within 120 s")


def _wait_distilled(
    stack: Stack,
    engine: Engine,
    ids: Sequence[uuid.UUID],
    console: Console,
    *,
    timeout: float,
    stop: Callable[[], bool],
) -> None:
    from hindsight.db.engine import read_session
    from hindsight.db.repositories import TranscriptRepository

    deadline = time.monotonic() + timeout
    with Progress(
        TextColumn("distilling sample conversations"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("distill", total=len(ids))
        while time.monotonic() < deadline and not stop():
            stack.check_children()
            with read_session(engine) as session:
                finished = TranscriptRepository(session).count_finished(ids)
            progress.update(task, completed=finished)
            if finished >= len(ids):
                return
            time.sleep(0.3)
    raise RuntimeError("the sample conversations were not distilled in time; see the worker log")


def _show(engine: Engine, namespaces: list[str], out: Console) -> None:
    from hindsight.db.engine import read_session
    from hindsight.services.memory_reads import count_rounds, list_episodes, list_memories
    from hindsight.tables import memory_table

    with read_session(engine) as session:
        for ns in namespaces:
            page = list_memories(session, ns, limit=200)
            out.print(memory_table(page.items, title=f"\nnamespace {ns}: {page.total} memories distilled"))
            for ep in list_episodes(session, ns, limit=10):
                out.print(f"  episode: {ep.summary[:160]}")
            out.print(f"  rounds kept for search: {count_rounds(session, ns)}")
