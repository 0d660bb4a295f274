"""The per-namespace term counts that weight keywords (migration 0007_namespace_term_counts): the triggers keep
them equal to a recount of the namespace's rows through inserts, text updates, namespace moves and deletes,
and recall reads them for exact, identifier and prefix terms."""

from __future__ import annotations

import sqlalchemy as sa

from hindsight.db.models import MemoryRow
from hindsight.db.recall_repository import RecallRepository
from hindsight.services.recall import term_weights
from hindsight.textsearch import memory_search_text

_KEPT = "SELECT lexeme, rows FROM namespace_term_counts WHERE source = 'memories' AND namespace = :ns"
_RECOUNT = (
    "SELECT l.lexeme, count(*) FROM memories m, unnest(tsvector_to_array(m.content_tsv) || ''::text) AS l(lexeme) "
    "WHERE m.namespace = :ns GROUP BY l.lexeme"
)


def _kept(engine: sa.Engine, ns: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {k: int(v) for k, v in conn.execute(sa.text(_KEPT), {"ns": ns}).all()}


def _recount(engine: sa.Engine, ns: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {k: int(v) for k, v in conn.execute(sa.text(_RECOUNT), {"ns": ns}).all()}


def test_counts_follow_every_write(engine, namespace, add_memory) -> None:
    ids = [add_memory(v) for v in ("User lives in Berlin", "User lives in Lisbon", "用户住在上海")]
    add_memory("User prefers green tea", ns=f"{namespace}-other")
    kept = _kept(engine, namespace)
    assert kept == _recount(engine, namespace)
    assert kept[""] == 3
    assert kept["lives"] == 2
    assert kept["berlin"] == 1

    with engine.begin() as conn:
        key = "user.city"
        conn.execute(
            sa.update(MemoryRow)
            .where(MemoryRow.id == ids[0])
            .values(value="User lives in Kyoto", search_text=memory_search_text(key, "User lives in Kyoto"))
        )
        conn.execute(sa.update(MemoryRow).where(MemoryRow.id == ids[1]).values(confidence=0.5))  # no text change
        conn.execute(sa.update(MemoryRow).where(MemoryRow.id == ids[2]).values(namespace=f"{namespace}-other"))
        conn.execute(sa.delete(MemoryRow).where(MemoryRow.id == ids[1]))
    kept = _kept(engine, namespace)
    assert kept == _recount(engine, namespace)
    assert kept[""] == 1
    assert "berlin" not in kept
    assert "lisbon" not in kept
    assert kept["kyoto"] == 1
    assert _kept(engine, f"{namespace}-other") == _recount(engine, f"{namespace}-other")

    with engine.begin() as conn:
        conn.execute(sa.delete(MemoryRow).where(MemoryRow.namespace.in_([namespace, f"{namespace}-other"])))
    assert _kept(engine, namespace) == {}
    assert _kept(engine, f"{namespace}-other") == {}


def test_recall_reads_exact_identifier_and_prefix_terms(session_factory, namespace, add_memory) -> None:
    for v in ("User lives in Berlin", "User lived in Lisbon", "Ticket QX-48213 is open", "我们的数据库是PostgreSQL"):
        add_memory(v)
    add_memory("Ticket QX-48213 is closed", ns=f"{namespace}-other")
    with session_factory() as s:
        rows, counts = RecallRepository(s).term_counts("memories", namespace, ["lives", "qx-48213", "数据库", "absent"])
    # `lives` is the prefix live:* (lives, lived); the ticket counts in this namespace only.
    assert (rows, counts) == (4, [2, 1, 1, 0])
    weights = term_weights(["lives", "qx-48213", "数据库", "absent"], counts, rows, seek_max_rows=2)
    assert abs(sum(w for _, w, _ in weights) - 1.0) < 1e-9
    # Rarest first while their rows add up to at most 2: absent (0), the ticket (1), 数据库 (1); not lives (2).
    assert [seek for *_, seek in weights] == [False, True, True, True]
    tighter = term_weights(["lives", "qx-48213", "数据库", "absent"], counts, rows, seek_max_rows=1)
    assert [seek for *_, seek in tighter] == [False, True, False, True]
    assert [w for _, w, _ in tighter] == [w for _, w, _ in weights]  # the budget moves no weight
    assert weights[0][1] < weights[1][1] == weights[2][1] < weights[3][1]  # common < rare < never seen


def test_the_counts_set_the_index_scan_for_their_transaction_only(engine, namespace, add_memory) -> None:
    """term_counts(search=plan) sets the plan's GUCs in its own statement, so the search that follows makes no
    round trip for them; after the transaction ends they are set again."""
    from sqlalchemy.orm import Session

    from hindsight.db.recall_repository import VectorPlan

    add_memory("User lives in Berlin")
    plan = VectorPlan(mode="iterative", ef_search=123, max_scan_tuples=4567, order="relaxed_order")
    statements: list[str] = []

    def gucs(s) -> tuple[str, str, str]:
        return tuple(
            s.execute(sa.text(f"SELECT current_setting('hnsw.{g}')")).scalar_one()
            for g in ("iterative_scan", "ef_search", "max_scan_tuples")
        )

    with Session(engine) as s:
        default = gucs(s)
        s.rollback()
        repo = RecallRepository(s)
        listen = lambda conn, cursor, sql, *a: statements.append(sql)  # noqa: E731
        sa.event.listen(s.get_bind(), "before_cursor_execute", listen)
        try:
            rows, counts = repo.term_counts("memories", namespace, ["lives", "absent"], search=plan)
            assert (rows, counts) == (1, [1, 0])
            repo._set_search(plan)  # noqa: SLF001 (what candidates() does before its statement)
            assert len(statements) == 1
            assert "set_config" in statements[0]
            assert gucs(s) == ("relaxed_order", "123", "4567")
            s.rollback()
            assert gucs(s) == default  # local to the transaction
            statements.clear()
            repo._set_search(plan)  # noqa: SLF001 — a new transaction: its own round trip
            assert len(statements) == 1
            assert gucs(s) == ("relaxed_order", "123", "4567")
            statements.clear()
            repo._set_search(VectorPlan(mode="iterative", ef_search=40))  # noqa: SLF001 — another plan
            assert len(statements) == 1
            assert gucs(s)[1] == "40"
        finally:
            sa.event.remove(s.get_bind(), "before_cursor_execute", listen)
