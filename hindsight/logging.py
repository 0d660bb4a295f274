"""structlog setup: console in dev, JSON lines otherwise (and optionally to a file), memory_id as a field."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import structlog

from hindsight.config import Settings


class _JsonFileProcessor:
    """Appends every event as one JSON line to a file, whatever the console renderer is."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8", buffering=1)
        self._render = structlog.processors.JSONRenderer(ensure_ascii=False)

    def __call__(self, logger: Any, name: str, event: dict[str, Any]) -> dict[str, Any]:
        self._fh.write(str(self._render(logger, name, dict(event))) + "\n")
        return event


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
