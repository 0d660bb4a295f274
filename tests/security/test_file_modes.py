"""Files that may hold user text are private (issue 10, finding 11): the JSON-lines log, the local stack's
process logs and the embedded Redis's append-only file and log are 0600 in 0700 folders, from the moment
they are created and after a rotation or rewrite, whatever the umask."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from hindsight.config import get_settings
from hindsight.local_servers import start_redis
from hindsight.logging import configure_logging


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask (022), under which a plain open() makes files anyone can read."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    config = structlog.get_config()
    handlers = logging.getLogger().handlers[:]
    try:
        yield
    finally:
        structlog.configure(**config)
        logging.getLogger().handlers[:] = handlers


@pytest.mark.usefixtures("open_umask", "restore_logging")
def test_the_log_file_is_0600_in_a_0700_folder_and_stays_so_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "new" / "logs" / "hindsight.jsonl"
    configure_logging(get_settings().model_copy(update={"log_file": path}), stream=open(os.devnull, "w"))  # noqa: SIM115
    log = structlog.get_logger("test")
    log.info("turn.seen", content="my sister Ana lives in Lisbon")
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert _mode(path.parent.parent) == 0o700, "folders created for the log are private too"
    assert "Ana" in path.read_text()

    # Rotated away (logrotate's rename) or deleted: the next line re-creates it, private again.
    path.rename(path.with_suffix(".1"))
    log.info("turn.seen", content="I moved to Porto")
    assert _mode(path) == 0o600
    assert "Porto" in path.read_text()
    path.unlink()
    log.info("turn.seen", content="I keep bees")
    assert _mode(path) == 0o600
    assert "bees" in path.read_text()


@pytest.mark.usefixtures("open_umask", "restore_logging")
def test_a_log_file_left_world_readable_is_narrowed_and_a_shared_folder_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    path = shared / "hindsight.jsonl"
    path.write_text('{"event": "old"}\n')
    path.chmod(0o644)
    configure_logging(get_settings().model_copy(update={"log_file": path}), stream=open(os.devnull, "w"))  # noqa: SIM115
    structlog.get_logger("test").info("turn.seen")
    assert _mode(path) == 0o600
    assert _mode(shared) == 0o755, "an operator's existing folder is not ours to change"


@pytest.mark.usefixtures("open_umask")
def test_the_embedded_redis_files_are_0600(tmp_path: Path) -> None:
    directory = tmp_path / "redis"
    server = start_redis(directory, persist=True)
    try:
        import redis

        client = redis.Redis(unix_socket_path=str(server.socket))
        client.rpush("hs:sess:ns\x1fs1:pending", '{"seq": 1, "role": "user", "content": "I live in Leeds"}')
        # A rewrite makes the append-only file anew: still private.
        client.bgrewriteaof()
        deadline = time.monotonic() + 20
        while client.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.05)
        client.rpush("hs:sess:ns\x1fs1:pending", '{"seq": 2, "role": "user", "content": "I keep bees"}')
        client.close()
    finally:
        server.stop()
    files = [p for p in directory.rglob("*") if p.is_file() and not p.is_socket()]
    assert any(p.name.startswith("appendonly") for p in files), files
    assert any(b"Leeds" in p.read_bytes() for p in files if p.name.startswith("appendonly"))
    assert {str(p.relative_to(directory)): oct(_mode(p)) for p in files} == {
        str(p.relative_to(directory)): oct(0o600) for p in files
    }
    assert _mode(directory) == 0o700
    assert all(_mode(d) == 0o700 for d in directory.rglob("*") if d.is_dir())


@pytest.mark.usefixtures("open_umask")
def test_an_existing_redis_folder_is_narrowed(tmp_path: Path) -> None:
    directory = tmp_path / "redis"
    directory.mkdir(mode=0o755)
    server = start_redis(directory, persist=False)
    server.stop()
    assert _mode(directory) == 0o700


@pytest.mark.usefixtures("open_umask")
def test_the_local_stack_process_logs_are_0600(tmp_path: Path) -> None:
    from devstack.stack import Stack

    settings = get_settings().model_copy(update={"data_dir": tmp_path / "data"})
    stack = Stack(settings=settings, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    stack.spawn("api", "--help")  # its stdout and stderr (uvicorn's access log, for the API) go to the log
    try:
        stack.children["api"].wait(timeout=120)
    finally:
        stack.stop()
    log = settings.process_log_dir / "api.log"
    assert log.read_text(), "the child wrote its output"
    assert _mode(log) == 0o600
    assert _mode(settings.process_log_dir) == 0o700
    assert _mode(settings.data_dir) == 0o700
