"""Rich tables the command line prints (the CLI's `memories`, the local stack's summary)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from schemas.memories import MemoryRead

WIDE_COLUMNS = 110
"""From this terminal width on, the table also shows each memory's kind and source; below it, the value keeps the
room (in 80 columns six columns left a value a dozen characters wide, and keys broke mid-word)."""


@dataclass(frozen=True)
class MemoryTable:
    """One row per memory: state (⚠ when in conflict), key, value, confidence, and on a wide terminal its kind and
    source. Laid out when printed, for the width it is printed at."""

    items: Sequence[MemoryRead]
    title: str

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(wide=options.max_width >= WIDE_COLUMNS)

    def table(self, *, wide: bool) -> Table:
        table = Table(title=self.title, show_lines=False)
        table.add_column("state", no_wrap=True)
        if wide:
            table.add_column("kind", no_wrap=True)
        table.add_column("key", overflow="fold")
        table.add_column("value", overflow="fold", ratio=1)
        table.add_column("conf", no_wrap=True)
        if wide:
            table.add_column("source", no_wrap=True)
        for m in self.items:
            table.add_row(*self._cells(m, wide=wide))
        return table

    @staticmethod
    def _cells(m: MemoryRead, *, wide: bool) -> Iterator[str]:
        yield m.state + (" ⚠" if m.has_conflict else "")
        if wide:
            yield m.kind
        yield m.key
        yield m.value
        yield f"{m.confidence:.2f}"
        if wide:
            yield m.source


def memory_table(items: Sequence[MemoryRead], title: str) -> MemoryTable:
    """The memories as a table that fits the terminal it is printed on."""
    return MemoryTable(items, title)
