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
from sqlalchemy import Engine

from hindsight.db.engine import session_scope
from hindsight.db.repositories import MemoryRepository
from hindsight.textsearch import SEARCH_VOCAB, memory_search_text

log = structlog.get_logger(__name__)


@dataclass
class ReindexReport:
    rebuilt: int = 0
    batches: int = 0


def reindex_search_text(
    engine: Engine, *, batch_size: int = 500, max_batches: int | None = None, version: str = SEARCH_VOCAB
) -> ReindexReport:
    """Rebuild the search text of every memory built with another vocabulary version than `version`."""
    report = ReindexReport()
    while max_batches is None or report.batches < max_batches:
        with session_scope(engine) as session:
            repo = MemoryRepository(session)
            rows = repo.lock_outdated_search_text(version, batch_size)
            if not rows:
                break
            for memory_id, key, value, also_slots in rows:
                repo.set_search_text(memory_id, memory_search_text(key, value, also_slots), version)
            report.rebuilt += len(rows)
            report.batches += 1
    if report.rebuilt:
        log.info("reindex.done", rebuilt=report.rebuilt, batches=report.batches, vocab=version)
    return report
