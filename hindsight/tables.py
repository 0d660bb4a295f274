"""Rich tables the command line prints (the CLI's `memories`, the local stack's summary)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from schemas.memories import MemoryRead


def memory_table(items: Sequence[MemoryRead], title: str) -> Table:
    """One row per memory: state (⚠ when in conflict), kind, key, value, confidence, source."""
    table = Table(title=title, show_lines=False)
    for col in ("state", "kind", "key", "value", "conf", "source"):
        table.add_column(col, overflow="fold")
    for m in items:
        flag = " ⚠" if m.has_conflict else ""
        table.add_row(m.state + flag, m.kind, m.key, m.value, f"{m.confidence:.2f}", m.source)
    return table
