"""How many BLAS threads one numpy call runs on.

On a box whose cores are shared (the embedded default runs the API, PostgreSQL and the workers together),
a multi-threaded matrix product ends at a barrier where its threads wait for each other, and a thread whose
core the scheduler gave away makes that wait a time slice: the slot classifier's 40×4608 product measured
0.39 / 7.6 ms (p50 / p95) on two threads beside a busy core, 0.30 / 0.42 on one; a single query's embedding
p99 153 against 8 ms (BENCHMARKS.md, "A query embeds on one BLAS thread"). Small products therefore run on one
thread; only batches are worth more.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import numpy as np  # noqa: F401  (loaded first, so the controller finds numpy's BLAS)
from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded libraries once, not on every call


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """numpy's BLAS on `n` threads inside the block, as it was after it."""
    with _blas().limit(limits=n, user_api="blas"):
        yield
