"""Soak: a steady stream of canary transcripts while random faults hit the worker, Redis and PostgreSQL.

    python bench/soak.py --minutes 10 [--rate 3] [--fault-every 30] [--seed 1]

It starts its own PostgreSQL and Redis (in a temporary directory), a worker (-c 2) and a beat, publishes
`--rate` canary transcripts per second, and every `--fault-every` seconds (±50 %) injects one random fault:

    kill-child     kill -9 of one worker child            kill-worker   kill -9 of the worker and its children
    term-worker    SIGTERM to the worker (warm shutdown)  redis-restart Redis restarted (AOF kept)
    redis-empty    Redis killed and restarted empty       pg-crash      PostgreSQL crash (immediate) + restart
    pg-down        PostgreSQL stopped for 10 s

A stopped worker is started again at once. After the last fault it stops publishing, waits for quiescence and
prints, counted by SQL as in tests/faults: accepted, done, dead, lost, duplicated; time-to-memory (episode
commit minus acceptance) p50/p99/max; and per fault kind the recovery time: from the end of the fault (the
service is back) until a probe transcript published at that moment is distilled.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sqlalchemy as sa  # noqa: E402

from tests.faults.conftest import (  # noqa: E402
    FAULT_ENV,
    FaultServices,
    FaultStack,
    Publisher,
    canary_events,
    counts,
    start_fault_services,
    stop_fault_services,
)

FAULTS = ["kill-child", "kill-worker", "term-worker", "redis-restart", "redis-empty", "pg-crash", "pg-down"]


class Feeder(threading.Thread):
    """Publishes `rate` transcripts per second; one that cannot be accepted (database down) is retried."""

    def __init__(self, pub: Publisher, prefix: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.pub, self.prefix, self.rate = pub, prefix, rate
        self.stop = threading.Event()
        self.rejected = 0

    def run(self) -> None:
        pending: list[Any] = []
        while not self.stop.is_set():
            if not pending:
                pending = canary_events(self.prefix, 1)
            try:
                self.pub.publish(pending)
                pending = []
            except Exception:  # PostgreSQL is down: nothing was accepted; the client retries the same event
                self.rejected += 1
                time.sleep(0.5)
                continue
            time.sleep(1.0 / self.rate)


def probe(svc: FaultServices, engine: sa.Engine, prefix: str, timeout: float = 300) -> float:
    """Seconds until a transcript published now is distilled (retrying acceptance while PG is down)."""
    t0 = time.monotonic()
    pub = Publisher(svc, engine)
    while True:
        try:
            (tid,) = pub.publish(canary_events(prefix, 1))
            break
        except Exception:
            time.sleep(0.2)
    while time.monotonic() - t0 < timeout:
        try:
            with engine.connect() as conn:
                state = conn.execute(sa.text("SELECT state FROM transcripts WHERE id = :i"), {"i": tid}).scalar()
            if state in ("done", "dead"):
                return time.monotonic() - t0
        except sa.exc.OperationalError:
            pass
        time.sleep(0.2)
    return float("inf")


def inject(kind: str, svc: FaultServices, st: FaultStack) -> None:
    if kind == "kill-child":
        children = st.children("worker")
        if children:
            random.choice(children).send_signal(signal.SIGKILL)
    elif kind == "kill-worker":
        st.kill_all("worker")
        st.start_worker("worker")
    elif kind == "term-worker":
        proc = st.procs.pop("worker")
        proc.stop(timeout=120)
        st.start_worker("worker")
    elif kind == "redis-restart":
        svc.redis_restart(down_for=2)
    elif kind == "redis-empty":
        svc.redis_restart(empty=True, down_for=2)
    elif kind == "pg-crash":
        svc.pg_stop("immediate")
        svc.pg_start()
    elif kind == "pg-down":
        svc.pg_stop("fast")
        time.sleep(10)
        svc.pg_start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=float, default=3.0, help="transcripts published per second")
    ap.add_argument("--fault-every", type=float, default=30.0, help="mean seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--drain-timeout", type=float, default=600, help="seconds to wait for quiescence at the end")
    args = ap.parse_args(argv)
    random.seed(args.seed)

    def _stop(signum: int, _: Any) -> None:
        raise SystemExit(f"stopped by signal {signum}")  # runs the cleanup below (servers, worker, beat)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    base = Path(tempfile.mkdtemp(prefix="hindsight-soak-"))
    svc = start_fault_services(base)
    engine = sa.create_engine(svc.database_url, pool_pre_ping=True)
    env = svc.as_services().env(**FAULT_ENV)
    env["HINDSIGHT_LOG_FILE"] = str(base / "hindsight.jsonl")
    st = FaultStack(svc=svc, log_dir=base, env=env)
    prefix, probe_prefix = "soak", "probe"
    recoveries: dict[str, list[float]] = {k: [] for k in FAULTS}
    injected: list[tuple[float, str]] = []
    try:
        st.start_worker("worker")
        st.start_beat("beat")
        pub = Publisher(svc, engine)
        feeder = Feeder(pub, prefix, args.rate)
        t_start = time.monotonic()
        feeder.start()
        deadline = t_start + args.minutes * 60
        while True:
            wait = random.uniform(0.5, 1.5) * args.fault_every
            if time.monotonic() + wait > deadline:
                break
            time.sleep(wait)
            kind = random.choice(FAULTS)
            at = time.monotonic() - t_start
            inject(kind, svc, st)
            rec = probe(svc, engine, probe_prefix)
            recoveries[kind].append(rec)
            injected.append((at, kind))
            print(f"[soak] t={at:6.1f}s {kind:13s} recovered in {rec:5.1f}s", file=sys.stderr, flush=True)  # noqa: T201
        feeder.stop.set()
        feeder.join(30)

        t_quiet = time.monotonic()
        while True:
            c = counts(engine, prefix)
            if c.unfinished == 0 or time.monotonic() - t_quiet > args.drain_timeout:
                break
            time.sleep(1)
        drain = time.monotonic() - t_quiet
        with engine.connect() as conn:
            ttm = [
                float(r[0])
                for r in conn.execute(
                    sa.text(
                        "SELECT extract(epoch FROM e.created_at - t.received_at) FROM transcripts t"
                        " JOIN episodes e ON e.transcript_id = t.id WHERE t.namespace LIKE 'soak-%'"
                    )
                )
            ]
        ttm.sort()
        p = lambda q: ttm[min(len(ttm) - 1, int(q * len(ttm)))] if ttm else float("nan")  # noqa: E731
        figures = {
            "minutes": args.minutes,
            "rate_per_s": args.rate,
            "faults": len(injected),
            "accepted": c.accepted,
            "done": c.done,
            "dead": c.dead,
            "lost": c.lost,
            "duplicated": c.duplicated,
            "rejected_while_pg_down": feeder.rejected,
            "send_failures_swept_later": pub.send_failures,
            "drain_after_last_fault_s": round(drain, 1),
            "time_to_memory_s": {
                "p50": round(p(0.50), 2),
                "p99": round(p(0.99), 2),
                "max": round(ttm[-1], 2) if ttm else None,
            },
            "recovery_s": {
                k: {"n": len(v), "median": round(statistics.median(v), 1), "max": round(max(v), 1)}
                for k, v in recoveries.items()
                if v
            },
        }
        print(json.dumps(figures, indent=2))  # noqa: T201
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0 if c.lost == 0 and c.duplicated == 0 else 1
    finally:
        st.stop()
        engine.dispose()
        stop_fault_services(svc)


if __name__ == "__main__":
    raise SystemExit(main())
