"""Rebuild memories' full-text search words after the slot vocabulary changed.

A memory's `search_text` holds its slot's topic words (`pipeline.slots`), and `search_vocab` the vocabulary
version they came from. When a release changes the registry's words, rows written before keep the old words
until this job rebuilds them: in keyset batches by id, each batch its own short transaction, so a large
table is never locked or held in memory at once, and a crash loses at most one batch of work (the next run
picks the rest up, since the rows still carry the old version). Safe to run twice, or beside writers: a row
rebuilt by a writer already carries the current version and is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy import ColumnElement, Engine, or_, select, update

from hindsight.db.engine import session_scope
from hindsight.db.models import MemoryRow
from hindsight.textsearch import SEARCH_VOCAB, memory_search_text

log = structlog.get_logger(__name__)


@dataclass
class ReindexReport:
    rebuilt: int = 0
    batches: int = 0


def _outdated(version: str) -> ColumnElement[bool]:
    # Two ranges and a NULL test instead of `IS DISTINCT FROM`: each is a range of the (search_vocab, id)
    # index, so finding that nothing is left costs a few index pages, not a scan of the table.
    v = MemoryRow.search_vocab
    return or_(v.is_(None), v < version, v > version)


def reindex_search_text(
    engine: Engine, *, batch_size: int = 500, max_batches: int | None = None, version: str = SEARCH_VOCAB
) -> ReindexReport:
    """Rebuild the search text of every memory built with another vocabulary version than `version`."""
    report = ReindexReport()
    while max_batches is None or report.batches < max_batches:
        with session_scope(engine) as session:
            rows = session.execute(
                select(MemoryRow.id, MemoryRow.key, MemoryRow.value, MemoryRow.also_slots)
                .where(_outdated(version))
                .order_by(MemoryRow.id)
                .limit(batch_size)
                .with_for_update(skip_locked=True)
            ).all()
            if not rows:
                break
            for r in rows:
                session.execute(
                    update(MemoryRow)
                    .where(MemoryRow.id == r.id, _outdated(version))
                    .values(search_text=memory_search_text(r.key, r.value, r.also_slots or ()), search_vocab=version)
                    .execution_options(synchronize_session=False)
                )
            report.rebuilt += len(rows)
            report.batches += 1
    if report.rebuilt:
        log.info("reindex.done", rebuilt=report.rebuilt, batches=report.batches, vocab=version)
    return report
