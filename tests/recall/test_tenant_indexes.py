"""Big namespaces get an HNSW index of their own (hindsight/db/tenant_indexes.py), and recall searches through it.

On a database of the test's own: the job reads every namespace of the table."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from hindsight.config import RetrievalSettings
from hindsight.db.engine import read_session
from hindsight.db.models import MemoryRow
from hindsight.db.recall_repository import RecallRepository, _statement, _vec, clear_caches
from hindsight.db.tenant_indexes import index_name, maintain_tenant_indexes, plan_indexes
from hindsight.services.recall import memory_plan, recall
from hindsight.textsearch import memory_search_text
from tests.factories import memory_values

SETTINGS = RetrievalSettings(tenant_index_min_rows=40, tenant_index_max_share=0.9, exact_scan_max_rows=0)
STATES = ["active", "stale"]


def _insert(engine: sa.Engine, namespace: str, vectors: np.ndarray, values: list[str] | None = None) -> list[uuid.UUID]:
    rows: list[dict[str, Any]] = []
    for i, vec in enumerate(vectors):
        value = values[i] if values else f"filler memory {i} of {namespace}"
        key = f"user.k{i}"
        rows.append(
            memory_values(
                namespace,
                kind="fact",
                key=key,
                value=value,
                embedding=[float(x) for x in vec],
                search_text=memory_search_text(key, value),
                embedding_model="usem3",
            )
        )
    with engine.begin() as conn:
        conn.execute(sa.insert(MemoryRow), rows)
    return [r["id"] for r in rows]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 512)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _index_state(engine: sa.Engine, name: str) -> bool | None:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:n)"), {"n": name}
        ).scalar()


def _explain(engine: sa.Engine, namespace: str, vector: np.ndarray) -> str:
    """The plan PostgreSQL runs for recall's vector query of `namespace`, with the plan recall chooses. A table
    this small is cheaper to sort than to search by an index: sorting is switched off, as if it were big."""
    with Session(engine) as s, s.begin():
        s.execute(sa.text("SET LOCAL enable_sort = off"))
        repo = RecallRepository(s)
        plan = repo.vector_plan(namespace, want=20, exact_max_rows=0, max_scan_tuples=20_000, max_ef=400)
        stmt = _statement("EXPLAIN (COSTS OFF) " + repo._vector_query(plan), plan, namespace)
        params = {"ns": namespace, "states": STATES, "qv": _vec([float(x) for x in vector]), "n": 10}
        return plan.mode + "\n" + "\n".join(s.execute(stmt, params).scalars())


@pytest.fixture
def tenants(own_engine: sa.Engine) -> dict[str, list[uuid.UUID]]:
    """`big` (60 rows, 0.67 of the table), `mid` (25) and a name that needs quoting (5)."""
    rng = np.random.default_rng(7)
    return {
        "big": _insert(own_engine, "big", _unit(rng, 60)),
        "mid": _insert(own_engine, "mid", _unit(rng, 25)),
        "it's 100% odd": _insert(own_engine, "it's 100% odd", _unit(rng, 5)),
    }


def test_a_big_namespace_gets_its_own_index_and_recall_searches_through_it(own_engine, tenants) -> None:
    clear_caches()
    assert "ix_memories_embedding_hnsw" in _explain(own_engine, "big", _unit(np.random.default_rng(1), 1)[0])
    report = maintain_tenant_indexes(own_engine, SETTINGS)
    own = index_name("memories", "big")
    assert (report.created, report.dropped, report.skipped) == ([own], [], False)
    assert _index_state(own_engine, own) is True
    assert _index_state(own_engine, index_name("memories", "mid")) is None  # 25 < 40 rows

    clear_caches()  # the plan's sizes (and whether an index exists) are cached for a minute
    rng = np.random.default_rng(2)
    for q in _unit(rng, 5):
        explained = _explain(own_engine, "big", q)
        assert explained.startswith("tenant"), explained
        assert own in explained, explained
        with Session(own_engine) as s, s.begin():
            repo = RecallRepository(s)
            plan = repo.vector_plan("big", want=20, exact_max_rows=0, max_scan_tuples=20_000, max_ef=400)
            got = repo.nearest("big", list(q), states=STATES, limit=10, plan=plan)
            truth = repo.exact_neighbours("big", list(q), states=STATES, limit=10)
        assert got == truth  # a 60-row graph is searched completely
    # A namespace without an index of its own keeps the table's.
    assert "ix_memories_embedding_hnsw" in _explain(own_engine, "mid", _unit(rng, 1)[0])

    # A second run changes nothing.
    again = maintain_tenant_indexes(own_engine, SETTINGS)
    assert (again.created, again.dropped, again.kept) == ([], [], 1)


def _index_scans(engine: sa.Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :n"), {"n": name}
            ).scalar_one()
        )


def test_the_tenant_index_serves_a_statement_prepared_on_a_pooled_connection(own_engine, tenants) -> None:
    """psycopg prepares a statement after 5 runs on a connection, and PostgreSQL may then plan it once for any
    parameter value (a generic plan, forced here): only a namespace written as a literal still lets the planner
    match the partial index. Counted by PostgreSQL's own index statistics."""
    maintain_tenant_indexes(own_engine, SETTINGS)
    clear_caches()
    own = index_name("memories", "big")
    before = _index_scans(own_engine, own)
    q = [float(x) for x in _unit(np.random.default_rng(6), 1)[0]]
    with Session(own_engine) as s, s.begin():
        s.execute(sa.text("SET LOCAL enable_sort = off"))
        s.execute(sa.text("SET LOCAL plan_cache_mode = force_generic_plan"))
        repo = RecallRepository(s)
        plan = repo.vector_plan("big", want=20, exact_max_rows=0, max_scan_tuples=20_000, max_ef=400)
        for _ in range(8):
            assert len(repo.nearest("big", q, states=STATES, limit=10, plan=plan)) == 10
        s.execute(sa.text("SELECT pg_stat_force_next_flush()"))
    assert _index_scans(own_engine, own) - before == 8


def test_recall_through_a_tenant_index_stays_inside_the_namespace(own_engine, tenants, embedder) -> None:
    text = "User keeps bees on the roof of the office"
    mine = _insert(own_engine, "big", np.asarray(embedder.embed([text])), [text])[0]
    theirs = _insert(own_engine, "mid", np.asarray(embedder.embed([text])), [text])[0]
    maintain_tenant_indexes(own_engine, SETTINGS)
    clear_caches()
    with read_session(own_engine) as s:
        plan = RecallRepository(s).vector_plan("big", want=20, exact_max_rows=0, max_scan_tuples=20_000, max_ef=400)
        assert plan.mode == "tenant"
        result = recall(s, "big", "does the user keep bees?", embedder=embedder, settings=SETTINGS, min_score=0.0)
    ids = [h.memory.id for h in result.hits]
    assert ids[0] == mine
    assert theirs not in ids
    assert {h.memory.namespace for h in result.hits} == {"big"}


def test_an_index_goes_when_its_namespace_shrinks_and_names_are_quoted(own_engine, tenants) -> None:
    odd = "it's 100% odd"
    _insert(own_engine, odd, _unit(np.random.default_rng(3), 40))  # 45 rows: an index, its name quoted
    report = maintain_tenant_indexes(own_engine, SETTINGS)
    assert sorted(report.created) == sorted([index_name("memories", "big"), index_name("memories", odd)])
    clear_caches()
    assert index_name("memories", odd) in _explain(own_engine, odd, _unit(np.random.default_rng(4), 1)[0])

    with own_engine.begin() as conn:  # `big` shrinks to 25 rows: above half the threshold, the index stays ...
        conn.execute(sa.text("DELETE FROM memories WHERE id = ANY(:ids)"), {"ids": tenants["big"][:35]})
    assert maintain_tenant_indexes(own_engine, SETTINGS).dropped == []
    with own_engine.begin() as conn:  # ... and at 15 it goes
        conn.execute(sa.text("DELETE FROM memories WHERE id = ANY(:ids)"), {"ids": tenants["big"][35:45]})
    report = maintain_tenant_indexes(own_engine, SETTINGS)
    assert report.dropped == [index_name("memories", "big")]
    assert _index_state(own_engine, index_name("memories", "big")) is None
    clear_caches()
    assert "ix_memories_embedding_hnsw" in _explain(own_engine, "big", _unit(np.random.default_rng(5), 1)[0])


def test_one_run_at_a_time_and_off_switch(own_engine, tenants) -> None:
    with own_engine.connect() as holder:
        holder.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": 0x68696E7464})
        assert maintain_tenant_indexes(own_engine, SETTINGS).skipped
        holder.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": 0x68696E7464})
    off = SETTINGS.model_copy(update={"tenant_indexes": False})
    assert maintain_tenant_indexes(own_engine, off).created == []
    assert _index_state(own_engine, index_name("memories", "big")) is None
    maintain_tenant_indexes(own_engine, SETTINGS)
    clear_caches()
    with Session(own_engine) as s:  # switched off, recall ignores an index that exists
        assert memory_plan(RecallRepository(s), "big", want=20, settings=SETTINGS).mode == "tenant"
        assert memory_plan(RecallRepository(s), "big", want=20, settings=off).mode == "iterative"


@pytest.mark.parametrize(
    ("counts", "existing", "create", "drop"),
    [
        ({"a": 100, "b": 39}, {}, ["a"], []),  # at the threshold or above
        ({"a": 950}, {}, [], []),  # most of the table: the table's own index serves it
        ({"a": 20}, {"a": True}, [], []),  # half the threshold keeps an index (no flapping)
        ({"a": 19}, {"a": True}, [], ["a"]),  # below it, it goes
        ({}, {"gone": True}, [], ["gone"]),  # an erased namespace
        ({"a": 100}, {"a": False}, ["a"], ["a"]),  # a failed build (invalid) is dropped and built again
    ],
)
def test_plan_indexes(counts: dict[str, int], existing: dict[str, bool], create: list[str], drop: list[str]) -> None:
    existing_names = {index_name("memories", ns): valid for ns, valid in existing.items()}
    plan = plan_indexes(counts, 1000, existing_names, "memories", min_rows=40, max_share=0.9)
    assert [ns for ns, _ in plan.create] == create
    assert plan.drop == sorted(index_name("memories", ns) for ns in drop)


def test_beat_and_the_cli_run_the_job(own_engine, tenants, monkeypatch, request) -> None:
    import json

    from typer.testing import CliRunner

    from hindsight.cli import app
    from hindsight.config import get_settings
    from workers.celery_app import celery_config
    from workers.tasks import maintain_tenant_indexes as task

    entry = celery_config(get_settings())["beat_schedule"]["tenant-indexes"]  # type: ignore[index]
    assert entry["task"] == task.name == "indexes.tenants"
    monkeypatch.setenv("HINDSIGHT_DATABASE_URL", own_engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("HINDSIGHT_RETRIEVAL__TENANT_INDEX_MIN_ROWS", "40")
    monkeypatch.setenv("HINDSIGHT_RETRIEVAL__TENANT_INDEX_MAX_SHARE", "0.9")
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)  # runs before monkeypatch restores the environment
    result = CliRunner().invoke(app, ["tenant-indexes"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["created"] == [index_name("memories", "big")]
    assert _index_state(own_engine, index_name("memories", "big")) is True


def test_a_tenant_index_is_built_like_the_tables_own(own_engine, tenants) -> None:
    maintain_tenant_indexes(own_engine, SETTINGS)
    with own_engine.connect() as conn:
        options = dict(
            conn.execute(
                sa.text(
                    "SELECT c.relname, c.reloptions FROM pg_class c"
                    " WHERE c.relname IN ('ix_memories_embedding_hnsw', :own)"
                ),
                {"own": index_name("memories", "big")},
            ).all()
        )
    assert options[index_name("memories", "big")] == options["ix_memories_embedding_hnsw"]
    assert options["ix_memories_embedding_hnsw"]  # m and ef_construction, as the migration set them
