"""`hindsight` command line: run the stack or one of its processes, migrate, ingest, inspect.

An edge: it opens the units of work, builds the Celery publisher and hands it to the services. With no URLs
configured, the commands that work on data (migrate, ingest, memories, search, dead-letters, lifecycle,
reindex, backfill-rounds, erase) use the local stack's embedded servers in data_dir, starting them if they
are not running (`ensure_local_services`); worker, beat, api and mcp only attach to running servers. The
local stack (devstack/) and the eval harness (evaluation/) are imported inside their commands only.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from hindsight.config import Settings, get_settings
from hindsight.errors import HindsightError, NoServer
from hindsight.tables import memory_table

app = typer.Typer(
    help="hindsight: long-term memory for LLM agents, distilled after the fact. With no database or Redis URL "
    "configured, the data commands use (and start) the local stack's embedded servers in data_dir.",
    no_args_is_help=True,
)
console = Console(stderr=True)
out = Console()


WaitOption = Annotated[
    float,
    typer.Option("--wait", help="Seconds to wait (with backoff) for PostgreSQL/Redis to accept connections."),
]


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def _local(*, postgres: bool = True, redis: bool = False) -> Settings:
    """The settings, with the local stack's embedded servers (started if not running) for what is asked
    and not configured: the data commands work on `make run`'s data after it stopped."""
    from hindsight.local_servers import ensure_local_services

    return ensure_local_services(get_settings(), postgres=postgres, redis=redis)


def _wait(settings: Settings, *, timeout: float, postgres: bool = True, redis: bool = True) -> None:
    """Wait for the servers a long-running process needs; a clear error when none is configured or running."""
    from hindsight.readiness import wait_for_services

    try:
        wait_for_services(settings, timeout=timeout, postgres=postgres, redis=redis)
    except NoServer as exc:
        raise _fail(str(exc)) from None


@app.command()
def up(
    samples: Annotated[bool, typer.Option(help="Feed the bundled Chinese and English sample conversations.")] = True,
    once: Annotated[bool, typer.Option(help="Stop the stack after showing the distilled memories.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the samples to be distilled.")] = 180,
) -> None:
    """Run the whole local stack on embedded defaults (PostgreSQL+pgvector, Redis, worker, beat, API)."""
    from devstack.stack import run_stack

    code = run_stack(get_settings(), feed_samples=samples, once=once, timeout=timeout, console=console, out=out)
    raise typer.Exit(code)


WORKER_STEPS_OFF = ("--without-gossip", "--without-mingle", "--without-heartbeat")
"""Worker steps hindsight has no use for: gossip and heartbeat broadcast worker events nobody consumes, and
mingle syncs revoked task ids at start-up (tasks are idempotent, nothing is revoked). Each is a connection to
reconnect when Redis restarts; closing gossip's on a lost connection is a known kombu failure
('NoneType' object has no attribute 'hostname') that stops the worker (`workers.broker_qos` makes the task channel's
close survive it). Remote control stays (`inspect ping`)."""


@app.command()
def worker(
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", help="Worker processes (default worker.concurrency).")
    ] = None,
    hostname: Annotated[
        str | None,
        typer.Option(
            "--hostname",
            "-n",
            help="The worker's node name (Celery's, e.g. 'distill-2@%h'): each worker sharing the queue, on one host "
            "or several, needs its own.",
        ),
    ] = None,
    loglevel: Annotated[str, typer.Option()] = "INFO",
    wait: WaitOption = 60,
) -> None:
    """Run a Celery worker (distillation and beat's jobs). Start as many as the load needs, on any hosts that
    reach the same PostgreSQL and Redis: the queue hands each transcript to one of them, and a transcript is
    distilled once whichever of them runs it (README "Scaling out")."""
    from hindsight.logging import configure_logging

    settings = get_settings()
    configure_logging(settings)
    _wait(settings, timeout=wait)
    processes = concurrency or settings.worker.concurrency
    if settings.embedding.threads is None:
        # Each child embeds on its own: share the cores out instead of letting every child use all of them
        # (measured: two processes at 2 BLAS threads each on 2 cores embed at half the rate of 1 each). The
        # children fork from here and inherit these cached settings.
        from hindsight.embeddings import threads_per_process

        settings.embedding.threads = threads_per_process(processes)
    argv = ["worker", f"--loglevel={loglevel}", "-Q", "hindsight", "-c", str(processes), *WORKER_STEPS_OFF]
    if hostname:
        argv += ["--hostname", hostname]
    _run_celery(argv)


@app.command()
def beat(loglevel: Annotated[str, typer.Option()] = "INFO", wait: WaitOption = 60) -> None:
    """Run the Celery beat scheduler (run exactly one; a second is harmless but useless)."""
    from hindsight.logging import configure_logging

    settings = get_settings()
    configure_logging(settings)
    _wait(settings, timeout=wait, postgres=False)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule = settings.beat_schedule_file
    _run_celery(["beat", f"--loglevel={loglevel}", "-s", str(schedule)])


def _run_celery(argv: list[str]) -> None:
    """Run a Celery command on hindsight's app and exit with its code. `app.worker_main()` and `app.start()` drop
    the code, so a worker that stopped on an unrecoverable error would exit 0 and look to a supervisor (compose's
    restart policy, systemd) like a clean stop; the command line run without standalone mode returns it."""
    from celery.bin.celery import celery as celery_command

    code = celery_command.main(args=["-A", "workers.celery_app:app", *argv], standalone_mode=False)
    if code:
        raise typer.Exit(int(code))


@app.command()
def api(
    host: Annotated[str | None, typer.Option()] = None,
    port: Annotated[int | None, typer.Option()] = None,
    wait: WaitOption = 60,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs)."""
    import uvicorn

    from hindsight.logging import configure_logging

    settings = get_settings()
    configure_logging(settings)
    _check_auth(settings, host or settings.api_host)
    _wait(settings, timeout=wait)
    uvicorn.run(
        "api.app:app_factory",
        factory=True,
        host=host or settings.api_host,
        port=port or settings.api_port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=10,
    )


def _check_auth(settings: Settings, host: str) -> None:
    """Refuse to serve when auth would be silently open (hindsight.auth_settings)."""
    from hindsight.auth_settings import AuthConfigError, resolve_auth

    try:
        resolve_auth(settings, host=host)
    except AuthConfigError as exc:
        raise _fail(str(exc)) from None


@app.command()
def mcp(
    transport: Annotated[
        str, typer.Option(help="stdio (launched by an MCP client) or http (streamable HTTP).")
    ] = "stdio",
    namespace: Annotated[
        str | None, typer.Option(help="stdio: the namespace this server acts for (default auth.default_namespace).")
    ] = None,
    host: Annotated[str | None, typer.Option(help="http: address to listen on (default api_host).")] = None,
    port: Annotated[int, typer.Option(help="http: port; the endpoint is /mcp.")] = 8766,
    wait: WaitOption = 60,
) -> None:
    """Serve the MCP server (tools memory_search, memory_write, memory_forget, memory_verify, remember, recall)."""
    from api.mcp import Transport, run
    from hindsight.logging import configure_logging

    if transport not in ("stdio", "http"):
        raise _fail("--transport must be stdio or http")
    mode: Transport = "http" if transport == "http" else "stdio"
    settings = get_settings()
    configure_logging(settings)  # stderr: over stdio, stdout carries only the protocol
    if transport == "http":
        _check_auth(settings, host or settings.api_host)
    _wait(settings, timeout=wait)
    run(settings, transport=mode, namespace=namespace, host=host or settings.api_host, port=port)


@app.command()
def token(
    grant: Annotated[list[str], typer.Argument(help="Namespaces (or prefixes ending in *) the token may use.")],
) -> None:
    """Make a new bearer token: prints the token once, and the HINDSIGHT_AUTH__TOKEN_DIGESTS entry to configure."""
    import hashlib
    import secrets

    value = "hs_" + secrets.token_urlsafe(32)
    digest = hashlib.sha256(value.encode()).hexdigest()
    typer.echo(json.dumps({"token": value, "token_digests": {digest: grant}}))


@app.command()
def migrate(revision: Annotated[str, typer.Argument()] = "head", wait: WaitOption = 60) -> None:
    """Upgrade the database schema (Alembic) to REVISION."""
    from hindsight.db import migrate as m
    from hindsight.db.engine import resolve_database_url

    settings = _local()
    _wait(settings, timeout=wait, redis=False)
    m.upgrade(resolve_database_url(settings), revision)
    console.print(f"database at revision {revision}")


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="JSON or JSONL file of transcripts.")],
    namespace: Annotated[str | None, typer.Option(help="Override the namespace of every transcript.")] = None,
) -> None:
    """Publish conversation-end events for the transcripts in FILE (all or nothing)."""
    from hindsight.db.engine import get_engine, session_scope
    from hindsight.services.ingest import publish_transcripts, read_events_file
    from workers.publisher import CeleryPublisher

    try:
        events = read_events_file(str(file), namespace=namespace)
        settings = _local(redis=True)
        with session_scope(get_engine(settings)) as session:
            accepted = publish_transcripts(
                session, events, publisher=CeleryPublisher.for_settings(settings), settings=settings
            )
    except HindsightError as exc:
        raise _fail(str(exc)) from None
    for a in accepted:
        typer.echo(json.dumps({"id": str(a.id), "namespace": a.namespace, "duplicate": a.duplicate}))
    console.print(
        f"accepted {sum(not a.duplicate for a in accepted)} transcript(s), "
        f"{sum(a.duplicate for a in accepted)} already known"
    )


@app.command()
def memories(
    namespace: Annotated[str, typer.Argument()],
    state: Annotated[list[str] | None, typer.Option(help="Filter by state (repeatable).")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Filter by kind (repeatable).")] = None,
    limit: Annotated[int, typer.Option()] = 50,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List the memories of NAMESPACE."""
    from hindsight.db.engine import get_engine, read_session
    from hindsight.services.memory_reads import list_memories

    with read_session(get_engine(_local())) as session:
        page = list_memories(session, namespace, states=state, kinds=kind, limit=limit)
    if as_json:
        out.print_json(page.model_dump_json())
        return
    out.print(memory_table(page.items, title=f"{namespace}: {page.total} memories"))


@app.command()
def search(
    namespace: Annotated[str, typer.Argument()],
    query: Annotated[str, typer.Argument()],
    top_k: Annotated[int, typer.Option()] = 5,
    min_score: Annotated[float | None, typer.Option(help="Override retrieval.score_threshold (0..1).")] = None,
) -> None:
    """Hybrid recall within NAMESPACE (the same service as the API's /search)."""
    from hindsight.db.engine import get_engine, session_scope
    from hindsight.embeddings import build_embedder
    from hindsight.services.recall import recall

    settings = _local()
    try:
        with session_scope(get_engine(settings)) as session:
            result = recall(
                session,
                namespace,
                query,
                embedder=build_embedder(settings.embedding),
                settings=settings.retrieval,
                top_k=top_k,
                min_score=min_score,
            )
    except HindsightError as exc:
        raise _fail(str(exc)) from None
    for hit in result.hits:
        typer.echo(f"{hit.score:.3f}  [{hit.memory.state}] {hit.memory.key}: {hit.memory.value}")
    if not result.hits:
        console.print("no memory passed the score threshold")


@app.command("dead-letters")
def dead_letters(
    requeue: Annotated[list[str] | None, typer.Option(help="Re-queue this transcript id (repeatable).")] = None,
    requeue_all: Annotated[bool, typer.Option("--all", help="Re-queue every dead letter.")] = False,
    namespace: Annotated[str | None, typer.Option()] = None,
) -> None:
    """List dead-lettered transcripts with their errors, or re-queue them after a fix."""
    from hindsight.db.engine import get_engine, read_session, session_scope
    from hindsight.services.deadletters import list_dead_letters, requeue_dead_letters
    from workers.publisher import CeleryPublisher

    if requeue or requeue_all:
        ids = [uuid.UUID(i) for i in requeue or []]
        settings = _local(redis=True)
        with session_scope(get_engine(settings)) as session:
            done = requeue_dead_letters(
                session,
                ids=None if requeue_all else ids,
                namespace=namespace,
                publisher=CeleryPublisher.for_settings(settings),
            )
        console.print(f"re-queued {len(done)} transcript(s)")
        return
    with read_session(get_engine(_local())) as session:
        rows = list_dead_letters(session, namespace=namespace)
    table = Table(title=f"{len(rows)} dead letter(s)")
    for col in ("id", "namespace", "attempts", "error"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.id), r.namespace, str(r.attempts), (r.last_error or "")[:120])
    out.print(table)


@app.command()
def lifecycle(
    now: Annotated[str | None, typer.Option(help="Run as if it were this ISO time (testing, backfills).")] = None,
) -> None:
    """Run the lifecycle job once (beat runs it periodically)."""
    from hindsight.db.engine import get_engine, session_scope
    from hindsight.services.lifecycle import run_lifecycle

    settings = _local()
    with session_scope(get_engine(settings)) as session:
        report = run_lifecycle(session, settings.lifecycle, now=datetime.fromisoformat(now) if now else None)
    typer.echo(
        json.dumps(
            {
                "skipped": report.skipped,
                "stale": report.stale,
                "archived": report.archived,
                "expired": report.expired,
            }
        )
    )


@app.command()
def reindex(
    batch_size: Annotated[int, typer.Option(help="Rows per transaction.")] = 500,
) -> None:
    """Rebuild full-text search words of memories written with another slot vocabulary (beat runs it too)."""
    from hindsight.db.engine import get_engine
    from hindsight.services.reindex import reindex_search_text
    from hindsight.textsearch import SEARCH_VOCAB

    report = reindex_search_text(get_engine(_local()), batch_size=batch_size)
    typer.echo(json.dumps({"rebuilt": report.rebuilt, "batches": report.batches, "vocab": SEARCH_VOCAB}))


@app.command("tenant-indexes")
def tenant_indexes() -> None:
    """Give each big namespace an HNSW index of its own and drop those of namespaces that shrank (beat runs it
    too; `retrieval.tenant_index_*` settings)."""
    from hindsight.db.engine import get_engine
    from hindsight.db.tenant_indexes import maintain_tenant_indexes

    settings = _local()
    report = maintain_tenant_indexes(
        get_engine(settings), settings.retrieval, on_step=lambda action, name: typer.echo(f"{action} {name}", err=True)
    )
    typer.echo(
        json.dumps(
            {
                "created": report.created,
                "dropped": report.dropped,
                "kept": report.kept,
                "skipped": report.skipped,
                "seconds": report.seconds,
            }
        )
    )


@app.command("backfill-rounds")
def backfill_rounds(
    batch_size: Annotated[int, typer.Option(help="Transcripts per transaction.")] = 50,
) -> None:
    """Build the rounds (user turns kept as retrievable units) of transcripts distilled before they existed."""
    from hindsight.db.engine import get_engine
    from hindsight.embeddings import build_embedder
    from hindsight.services.rounds import backfill_rounds as backfill

    settings = _local()
    report = backfill(get_engine(settings), build_embedder(settings.embedding), batch_size=batch_size)
    typer.echo(json.dumps({"transcripts": report.transcripts, "rounds": report.rounds, "batches": report.batches}))


@app.command()
def erase(
    namespace: Annotated[str, typer.Argument()],
    memory: Annotated[list[str] | None, typer.Option("--memory", help="Erase this memory id (repeatable).")] = None,
    key_prefix: Annotated[
        str | None, typer.Option(help="Erase a subject: every memory whose key starts with this (colleague:li.).")
    ] = None,
    subject: Annotated[str | None, typer.Option(help="Erase a subject: every memory about it (colleague:li).")] = None,
    transcript: Annotated[str | None, typer.Option(help="Erase this transcript (id) and what only it taught.")] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Erase the whole namespace (an end user leaving); needs --confirm.")
    ] = False,
    confirm: Annotated[str | None, typer.Option(help="With --all: the namespace again.")] = None,
) -> None:
    """Erase for real, which cannot be undone: memories, a subject (and every turn, episode, session and log
    line naming it), one transcript, or the whole NAMESPACE. Prints the result as JSON."""
    import getpass

    from hindsight.db.engine import get_engine, session_scope
    from hindsight.services import erase as erase_service
    from workers.publisher import CeleryPublisher

    chosen = [bool(memory), bool(key_prefix or subject), bool(transcript), everything]
    if sum(chosen) != 1:
        raise _fail("name exactly one of --memory, --key-prefix/--subject, --transcript, --all")
    if everything and confirm != namespace:
        raise _fail("--all erases the whole namespace: add --confirm NAMESPACE")
    settings = _local(redis=True)
    engine = get_engine(settings)
    actor = f"cli/{getpass.getuser()}"[:64]
    try:
        outside = erase_service.outside_of(settings, publisher=CeleryPublisher.for_settings(settings), engine=engine)
        tid = uuid.UUID(transcript) if transcript else None
        ids = [uuid.UUID(m) for m in memory or []]
        with session_scope(engine) as session:
            if everything:
                result = erase_service.erase_namespace(session, namespace, actor=actor, outside=outside)
            elif tid is not None:
                result = erase_service.erase_transcript(session, namespace, tid, actor=actor, outside=outside)
            else:
                result = erase_service.erase(
                    session,
                    namespace,
                    memory_ids=ids,
                    key_prefix=key_prefix,
                    subject=subject,
                    actor=actor,
                    outside=outside,
                )
    except ValueError as exc:  # a malformed id
        raise _fail(str(exc)) from None
    except HindsightError as exc:
        raise _fail(str(exc)) from None
    typer.echo(result.model_dump_json())
    console.print(f"erased {len(result.memory_ids)} memory(ies), {result.transcripts_erased} transcript(s)")


train_app = typer.Typer(help="Retrain the offline distiller's learned parts (seeded, reproducible).")
app.add_typer(train_app, name="train")


@train_app.command("extractor")
def train_extractor(
    train_dir: Annotated[Path, typer.Option(help="The public corpora (../shared/train).")] = Path("../shared/train"),
    seed: Annotated[int, typer.Option(help="Random seed: the same seed and data give the same model.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Where to write the model (default: the packaged one).")] = None,
    grid: Annotated[bool, typer.Option(help="Try several models and keep the best on validation.")] = False,
    threshold: Annotated[
        float | None, typer.Option(help="The P(fact) bar to store (default: the shipped one, 0.35).", min=0, max=1)
    ] = None,
    choose_threshold: Annotated[
        bool, typer.Option(help="Store the P(fact) bar the clause validation prefers instead.")
    ] = False,
) -> None:
    """Fit the slot classifier of the offline extractor and print its validation figures (one JSON line)."""
    from hindsight.training.extractor import SHIPPED_THRESHOLD, train
    from pipeline.slot_model import MODEL_PATH

    if choose_threshold and threshold is not None:
        raise _fail("--threshold and --choose-threshold exclude each other")
    if not (train_dir / "spc" / "dialogues.jsonl").is_file():
        raise _fail(f"no training corpora under {train_dir} (expected spc/, xpersona_zh/, ...)")
    bar = None if choose_threshold else (SHIPPED_THRESHOLD if threshold is None else threshold)
    report = train(train_dir, seed=seed, out=out or MODEL_PATH, grid=grid, threshold=bar)
    for name, figures in sorted(report["validation"].items()):
        console.print(f"clauses   {name:40s} " + "  ".join(f"{k}={v}" for k, v in figures.items()))
    report["extractor"] = _validate_extractor(train_dir, out or MODEL_PATH)
    typer.echo(json.dumps(report, ensure_ascii=False))


@train_app.command("change")
def train_change(
    seed: Annotated[int, typer.Option(help="Random seed: the same seed and data give the same model.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Where to write the model (default: the packaged one).")] = None,
) -> None:
    """Fit the change classifier (does a clause say a lasting state changed?) on the hand-written sentences in
    hindsight/training/data and print its validation figures (one JSON line)."""
    from hindsight.training.change import train
    from pipeline.slot_model import CHANGE_MODEL_PATH

    report = train(seed=seed, out=out or CHANGE_MODEL_PATH)
    for name, figures in report["validation"].items():
        console.print(f"change    {name:4s} " + "  ".join(f"{k}={v}" for k, v in figures.items()))
    typer.echo(json.dumps(report, ensure_ascii=False))


@train_app.command("glue")
def train_glue(
    seed: Annotated[int, typer.Option(help="Random seed: the same seed and data give the same model.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Where to write the model (default: the packaged one).")] = None,
) -> None:
    """Fit the glue classifier (is a clause said beside a fact of the moment, or a detail of it?) on the hand-written
    pairs in hindsight/training/data and print its validation figures (one JSON line)."""
    from hindsight.training.glue import train
    from pipeline.slot_model import GLUE_MODEL_PATH

    report = train(seed=seed, out=out or GLUE_MODEL_PATH)
    for name, figures in report["validation"].items():
        console.print(f"glue      {name:4s} " + "  ".join(f"{k}={v}" for k, v in figures.items()))
    typer.echo(json.dumps(report, ensure_ascii=False))


def _validate_extractor(train_dir: Path, model: Path, limit: int = 120) -> dict[str, object]:
    from hindsight.training.persona_eval import evaluate
    from pipeline.slot_model import SlotClassifier, SlotJudge

    figures = evaluate(train_dir, SlotJudge(classifier=SlotClassifier(model)), limit=limit)
    for name, row in figures.items():
        console.print(f"extractor {name:40s} " + "  ".join(f"{k}={v}" for k, v in row.items()))
    return figures


@train_app.command("validate")
def train_validate(
    train_dir: Annotated[Path, typer.Option(help="The public corpora (../shared/train).")] = Path("../shared/train"),
    model: Annotated[Path | None, typer.Option(help="The model to validate (default: the packaged one).")] = None,
    limit: Annotated[int, typer.Option(help="Validation dialogues per corpus.")] = 120,
) -> None:
    """Run the whole offline extractor on the persona-split validation dialogues (recall, slot accuracy,
    precision, memories per 10 user turns), one JSON line."""
    from pipeline.slot_model import MODEL_PATH

    typer.echo(json.dumps(_validate_extractor(train_dir, model or MODEL_PATH, limit)))


@app.command(
    "eval",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def eval_(ctx: typer.Context) -> None:
    """Measure memory quality on data files: distill, locomo, longmemeval, madial (`hindsight eval --help`)."""
    # The harness (evaluation/) is imported only when an eval runs: the runtime package does not depend on it.
    from evaluation.cli import eval_app

    typer.main.get_command(eval_app).main(args=ctx.args, prog_name="hindsight eval", standalone_mode=True)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
