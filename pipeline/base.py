"""The seams the stages depend on: a language back-end and an embedder."""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from schemas.pipeline import Distillation, Transcript

T = TypeVar("T", bound=BaseModel)


@runtime_checkable
class LanguageBackend(Protocol):
    """Summarize a transcript and extract its stable facts (stages 1 and 2)."""

    name: str

    def distill(self, transcript: Transcript) -> Distillation: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class LLMClient(Protocol):
    """One narrow interface to a chat model: messages in, a validated pydantic object out.

    Implementations use temperature 0 and a JSON-schema response format, retry transient failures only,
    and raise hindsight.errors.TransientError / PermanentError.
    """

    model: str

    def generate(self, messages: list[dict[str, str]], response_model: type[T]) -> T: ...
