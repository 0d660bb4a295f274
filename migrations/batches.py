"""Data rewrites shared by migrations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

BATCH = 500


def rewrite_column(conn: Any, table: str, columns: str, target: str, compute: Callable[[Any], str]) -> None:
    """Set `target` of every row of `table` to `compute(row)` (the row has `id` and `columns`), in keyset
    batches by id: a big table is rewritten without holding it in memory or one long-running statement."""
    last = None
    while True:
        rows = conn.execute(
            sa.text(
                f"SELECT id, {columns} FROM {table} WHERE (CAST(:last AS uuid) IS NULL OR id > :last) "
                "ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            return
        conn.execute(
            sa.text(f"UPDATE {table} SET {target} = :t WHERE id = :id"),
            [{"id": r.id, "t": compute(r)} for r in rows],
        )
        last = rows[-1].id
