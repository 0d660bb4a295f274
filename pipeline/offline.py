"""The offline language back-end: rules and lexicons, no model service (stages 1 and 2)."""

from __future__ import annotations

from pipeline.extract import extract_facts
from pipeline.summarize import summarize
from schemas.pipeline import Distillation, Transcript


class OfflineDistiller:
    """Implements `pipeline.base.LanguageBackend`; the default when no LLM is configured."""

    name = "offline/1"

    def distill(self, transcript: Transcript) -> Distillation:
        return Distillation(summary=summarize(transcript), facts=extract_facts(transcript), backend=self.name)
