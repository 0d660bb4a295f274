"""The memory table the CLI and the local stack print fits the terminal it is printed on."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from hindsight.tables import memory_table
from schemas.memories import MemoryRead
from tests.factories import memory_values

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _memory(key: str, value: str, *, conflict: bool = False) -> MemoryRead:
    row = memory_values("demo", key=key, value=value, has_conflict=conflict, confidence=0.75, at=NOW)
    return MemoryRead.model_validate({**row, "ttl_days": None, "last_accessed_at": None, "access_count": 0})


def _render(width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(
        memory_table(
            [
                _memory("user.programming_language", "User switched from Polars to DuckDB for most of their analysis"),
                _memory("user.database", "用户团队2026年11月23日那周把数据库升级到 PostgreSQL 16 了", conflict=True),
            ],
            title="demo: 2 memories",
        )
    )
    return console.export_text()


def test_a_narrow_terminal_keeps_keys_whole_and_gives_the_value_the_room() -> None:
    text = _render(80)
    assert "user.programming_language" in text  # not broken mid-word
    assert "active ⚠" in text
    assert "source" not in text
    assert "kind" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_wide_terminal_also_shows_kind_and_source() -> None:
    text = _render(160)
    assert "source" in text
    assert "kind" in text
    assert "preference" in text
    assert "User switched from Polars to DuckDB for most of their analysis" in text  # one line
