"""Rounds for transcripts distilled before the rounds index existed (migration 0010).

New transcripts get their rounds in their distillation's transaction (services/distill.py). This job builds
them for the `done` transcripts that have none: in keyset batches by id, each batch its own transaction, the
facts for the keys read from the memories whose provenance names the transcript's turns (quarantined ones
left out, as distillation leaves them out). A turn an erase redacted starts and answers no round. Safe to run
twice or beside workers: a transcript that has rounds is skipped, and an insert that meets rounds written
meanwhile does nothing (unique transcript and position).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import structlog
from sqlalchemy import Engine

from hindsight.db.engine import session_scope
from hindsight.db.repositories import ProvenanceRepository, RoundRepository, TranscriptRepository
from hindsight.services.distill import to_transcript
from hindsight.services.erase import ERASED
from pipeline.base import Embedder
from pipeline.rounds import split_rounds

log = structlog.get_logger(__name__)


@dataclass
class BackfillReport:
    transcripts: int = 0
    rounds: int = 0
    batches: int = 0


def backfill_rounds(
    engine: Engine, embedder: Embedder, *, batch_size: int = 50, max_batches: int | None = None
) -> BackfillReport:
    """Build the rounds of every distilled transcript that has none."""
    report = BackfillReport()
    after = uuid.UUID(int=0)
    while max_batches is None or report.batches < max_batches:
        with session_scope(engine) as session:
            rows = TranscriptRepository(session).done_without_rounds(after, batch_size)
            if not rows:
                break
            after = rows[-1].id
            facts = ProvenanceRepository(session).facts_of_transcripts([r.id for r in rows])
            built = []
            for row in rows:
                transcript = to_transcript(row)
                transcript = transcript.model_copy(
                    update={
                        "turns": [
                            t.model_copy(update={"content": ""}) if t.content == ERASED else t for t in transcript.turns
                        ]
                    }
                )
                keyed = [(list(tids), v) for tid, tids, v in facts if tid == row.id]
                built.append((row, split_rounds(transcript, keyed)))
            flat = [r for _, rounds in built for r in rounds]
            vectors = iter(embedder.embed([r.embed_text for r in flat]) if flat else [])
            repo = RoundRepository(session)
            for row, rounds in built:
                repo.add(row.namespace, row.id, row.occurred_at, rounds, [next(vectors) for _ in rounds])
            report.transcripts += len(rows)
            report.rounds += len(flat)
            report.batches += 1
    if report.rounds:
        log.info("rounds.backfilled", transcripts=report.transcripts, rounds=report.rounds, batches=report.batches)
    return report
