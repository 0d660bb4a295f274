"""structlog setup: console in dev, JSON lines otherwise (and optionally to a file), memory_id as a field."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import structlog

from hindsight.files import open_private

if TYPE_CHECKING:
    from hindsight.config import Settings


class _JsonFileProcessor:
    """Appends every event as one JSON line to a file, whatever the console renderer is.

    The file holds user text, so it is created 0600 (hindsight.files); when it is rotated away or deleted,
    the next line re-creates it the same way instead of going on into the old file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh: IO[Any] | None = None
        self._identity: tuple[int, int] | None = None
        self._render = structlog.processors.JSONRenderer(ensure_ascii=False)
        self._reopen_if_moved()

    def _reopen_if_moved(self) -> IO[Any]:
        try:
            st = os.stat(self._path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            current = None
        if self._fh is None or current != self._identity:
            # The old handle is not closed here: another thread may be writing to it. It closes when the
            # last reference goes. No lock either, which a forked worker could inherit held.
            fh = open_private(self._path)
            st = os.fstat(fh.fileno())
            self._fh, self._identity = fh, (st.st_dev, st.st_ino)
        return self._fh

    def __call__(self, logger: Any, name: str, event: dict[str, Any]) -> dict[str, Any]:
        self._reopen_if_moved().write(str(self._render(logger, name, dict(event))) + "\n")
        return event


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    # sys.stderr is looked up for each logger, not once at import: a redirect or a test's capture that replaces
    # it later is followed.
    return structlog.PrintLogger(sys.stderr)


def configure_default_logging() -> None:
    """Until `configure_logging` runs: structlog's own defaults, but written to stderr.

    structlog's default logger prints to stdout, which CLI commands, bench scripts and piped subprocesses keep for
    their data (`hindsight memories NS --json | jq`). Run when the package is imported; a configuration that
    someone made before is left as it is, and `configure_logging` (or any later `structlog.configure`) replaces
    this one."""
    if not structlog.is_configured():
        structlog.configure(logger_factory=_stderr_logger)


def configure_logging(settings: Settings, *, stream: Any = None) -> None:
    """Configure structlog and route stdlib loggers through it. `stream` defaults to stderr."""
    level = logging.getLevelName(settings.log_level.upper())
    stream = stream or sys.stderr
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    if settings.log_file:
        processors.append(_JsonFileProcessor(settings.log_file))
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if settings.json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level if isinstance(level, int) else 20),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for noisy in ("jieba", "sentence_transformers", "httpx", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
