"""The collaborators every process needs, built once per process (worker child, API lifespan, CLI)."""

from __future__ import annotations

from dataclasses import dataclass

from hindsight.config import Settings
from hindsight.embeddings import build_embedder
from pipeline.base import Embedder, LanguageBackend


@dataclass
class Clients:
    backend: LanguageBackend
    embedder: Embedder
    settings: Settings


def build_backend(settings: Settings, embedder: Embedder | None = None) -> LanguageBackend:
    if settings.llm.backend == "openai":
        from hindsight.llm import OpenAICompatibleClient
        from pipeline.llm_backend import LLMBackend

        return LLMBackend(
            OpenAICompatibleClient.from_settings(settings.llm),
            max_transcript_chars=settings.llm.max_transcript_chars,
        )
    from pipeline.offline import OfflineDistiller

    return OfflineDistiller(embedder)


def build_clients(settings: Settings) -> Clients:
    embedder = build_embedder(settings.embedding)
    return Clients(backend=build_backend(settings, embedder), embedder=embedder, settings=settings)
