"""Embeddings reach PostgreSQL as halfvec text written by `halfvec_text`: the server must store exactly the halves
pgvector's own (longer) encoder would have given it, and they must read back as float32 arrays."""

from __future__ import annotations

import uuid

import numpy as np
import sqlalchemy as sa
from pgvector import HalfVector

from hindsight.db.models import Embedding, halfvec_text


def test_halfvec_text_stores_the_same_halves_as_pgvectors_encoder(engine: sa.Engine) -> None:
    rng = np.random.default_rng(0)
    vectors = [rng.standard_normal(64).astype(np.float32) * scale for scale in (1e-4, 1e-2, 1.0, 40.0)]
    vectors.append(np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 6.1e-5, 0.333333, 0.1] * 8, dtype=np.float32))
    table = sa.Table(
        f"halfvec_{uuid.uuid4().hex[:8]}", sa.MetaData(), sa.Column("i", sa.Integer), sa.Column("e", Embedding(64))
    )
    with engine.begin() as conn:
        table.create(conn)
    try:
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"i": i, "e": v.tolist()} for i, v in enumerate(vectors)])
            for i, v in enumerate(vectors):  # pgvector's own text, every float32 digit
                conn.execute(
                    sa.text(f"INSERT INTO {table.name} VALUES (:i, CAST(:t AS halfvec))"),
                    {"i": 100 + i, "t": HalfVector._to_db(v.tolist())},
                )
            rows = dict(conn.execute(sa.select(table.c.i, table.c.e)).all())
        for i, v in enumerate(vectors):
            assert rows[i].dtype == np.float32
            assert np.array_equal(rows[i], rows[100 + i])  # the same halves either way
            assert np.array_equal(rows[i], v.astype(np.float16).astype(np.float32))
        assert len(halfvec_text(vectors[2]) or "") < len(HalfVector._to_db(vectors[2].tolist()) or "") / 2
        assert halfvec_text(None) is None
    finally:
        with engine.begin() as conn:
            table.drop(conn)
