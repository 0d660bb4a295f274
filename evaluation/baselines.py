"""What a user would otherwise pick: dense retrieval, BM25 and the two fused over raw texts (turns or memories).

Dense uses the same embedder as the store; BM25 (rank-bm25's Okapi) tokenizes with the store's own
segmenter (jieba for Chinese, word tokens otherwise); hybrid fuses their rankings by reciprocal rank
(Cormack et al. 2009, k = 60), the usual first thing a team builds on top of both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hindsight.textsearch import segment
from pipeline.base import Embedder


class DenseIndex:
    def __init__(self, texts: Sequence[str], embedder: Embedder, *, vectors: np.ndarray | None = None) -> None:
        self._embedder = embedder
        self._m = vectors if vectors is not None else np.asarray(embedder.embed(list(texts)), dtype=np.float32)

    def rank(self, query: str, k: int, *, query_vector: Sequence[float] | None = None) -> list[int]:
        if len(self._m) == 0:
            return []
        qv = np.asarray(query_vector if query_vector is not None else self._embedder.embed([query])[0], np.float32)
        scores = self._m @ qv
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order[:k]]


class BM25Index:
    def __init__(self, texts: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        self._docs = [segment(t) or ["∅"] for t in texts]
        self._bm25 = BM25Okapi(self._docs) if self._docs else None

    def rank(self, query: str, k: int) -> list[int]:
        if self._bm25 is None:
            return []
        terms = segment(query)
        if not terms:
            return []
        scores = self._bm25.get_scores(terms)
        order = np.argsort(-np.asarray(scores), kind="stable")
        return [int(i) for i in order[:k]]


RRF_K = 60
"""Reciprocal-rank fusion's constant: 60, as in Cormack, Clarke and Büttcher (SIGIR 2009) and most libraries."""


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], depth: int, k: int = RRF_K) -> list[int]:
    """Indices ranked by the sum of 1 / (k + rank) over the rankings each appears in (rank from 1); ties keep
    the order of first appearance."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking, start=1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda i: -score[i])[:depth]
