"""All SQL of hybrid recall: candidates from pgvector and from full text in one statement, provenance, access
counts, the namespace's own term counts that weight keywords, and the namespace sizes the plan depends on.

Namespace filtering and pgvector's HNSW index (pgvector >= 0.8, migration 0011; measured in bench/recall.py,
figures in BENCHMARKS.md):

* a namespace of up to `retrieval.exact_scan_max_rows` rows is scanned exactly (its rows come from the
  (namespace, …) index and the distance is computed for each; the result is exact);
* a bigger one uses the HNSW index with the namespace filter inside the scan: `hnsw.iterative_scan =
  strict_order` keeps scanning until the filtered query has its rows; `hnsw.ef_search` grows as the
  namespace's share of the table shrinks, up to `retrieval.max_ef_search`.
  An iterative scan meets the namespace's rows at about `share` (its fraction of the table) of the entries it
  visits; where 4 x want / share entries would pass `retrieval.max_scan_tuples` (the scan would stop short), the
  exact scan is used;
* a namespace with an HNSW index of its own (`hindsight/db/tenant_indexes.py`) is searched through it: the
  namespace is written into the statement as a literal, so that the planner can match the partial index.

Keyword candidates come from the same read of the rows when the namespace is scanned exactly, and otherwise from
the GIN index of namespaced lexemes (migration 0015_namespace_lexemes), whose posting lists hold one namespace's
rows each (`_candidate_ctes`).
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import String, TextClause, bindparam, text
from sqlalchemy.orm import Session

from hindsight.db.models import halfvec_text
from hindsight.db.tenant_indexes import index_name
from hindsight.textsearch import tsquery_term

# Columns of MemoryRead (schemas.memories), everything but the embedding and the text-search columns.
MEMORY_COLUMNS = (
    "id",
    "namespace",
    "kind",
    "key",
    "value",
    "subject",
    "source",
    "confidence",
    "state",
    "pinned",
    "negated",
    "ttl_days",
    "has_conflict",
    "backend",
    "embedding_model",
    "created_at",
    "updated_at",
    "last_verified_at",
    "state_changed_at",
    "last_accessed_at",
    "access_count",
)

# The access statistics live in `memory_access` (a LEFT JOIN as `a`), not in the memory row.
_MEMORY_SELECT = {
    "last_accessed_at": "a.last_accessed_at",
    "access_count": "coalesce(a.access_count, 0) AS access_count",
}

_CACHE_SECONDS = 60.0
PGVECTOR_MAX_SCAN_TUPLES = 20_000  # hnsw.max_scan_tuples default
TENANT_EF_SEARCH = 100  # hnsw.ef_search in a namespace's own index (choose_plan)

# Columns of EpisodeRead and RoundRead (schemas.memories), by table.
_UNIT_COLUMNS = {
    "episodes": "e.id, e.transcript_id, e.summary, e.entities, e.turn_ids, e.backend, e.occurred_at, e.created_at",
    "rounds": "r.id, r.transcript_id, r.seq, r.turn_ids, r.text, r.occurred_at, r.created_at",
}


@dataclass
class Candidate:
    """A memory that either side proposed, with its raw cosine and keyword coverage (`row` holds the
    MemoryRead columns and `provenance`, its provenance rows as JSON)."""

    row: dict[str, Any]
    cosine: float
    keyword: float


@dataclass(frozen=True)
class VectorPlan:
    mode: str
    """`exact` (every row of the namespace), `iterative` (the table's HNSW index, filtered inside its scan) or
    `tenant` (the namespace's own HNSW index)."""
    ef_search: int = 40
    max_scan_tuples: int = PGVECTOR_MAX_SCAN_TUPLES
    order: str = "strict_order"
    """hnsw.iterative_scan: `strict_order` (measured faster here at the same recall) or `relaxed_order`."""


class _TTLCache:
    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._data: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            hit = self._data.get(key)
        if hit is None or time.monotonic() - hit[0] > self._seconds:
            return None
        return hit[1]

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            if len(self._data) > 10_000:
                self._data.clear()
            self._data[key] = (time.monotonic(), value)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_sizes = _TTLCache(_CACHE_SECONDS)


def clear_caches() -> None:
    """Forget cached namespace sizes (tests, benchmarks)."""
    _sizes.clear()


def _vec(embedding: Sequence[float]) -> str:
    text = halfvec_text(embedding)  # the query is cast to halfvec, as the stored vectors are
    assert text is not None
    return text


def choose_plan(
    ns_rows: int,
    total: int,
    *,
    want: int,
    exact_max_rows: int,
    max_scan_tuples: int,
    max_ef: int,
    own_index: bool = False,
) -> VectorPlan:
    """How to find the `want` nearest rows of a namespace holding `ns_rows` of a table's `total` rows (and
    an index of its own when `own_index`)."""
    if ns_rows <= exact_max_rows:
        return VectorPlan("exact")
    if own_index:
        # The namespace is its index's whole table (iterative only for recall's state filter). On 10k-row
        # namespaces' own indexes, recall@10 was 0.988 at ef 40 and 0.997 at 100, for 0.3 ms more.
        return VectorPlan(
            "tenant", ef_search=min(max_ef, max(TENANT_EF_SEARCH, 2 * want)), max_scan_tuples=max_scan_tuples
        )
    share = ns_rows / max(total, ns_rows, 1)
    # An iterative scan meets the namespace's rows at about `share` of the entries it visits: allow it 4 x.
    if math.ceil(4 * want / share) > max_scan_tuples:
        return VectorPlan("exact")
    # Its candidate list should hold about 2 x `want` of them: pgvector's default 40 when the namespace is the
    # table, more as its share shrinks (recall@10 0.92-0.96 at 40 for a tenth of the table, 0.99 at 400).
    ef = min(max_ef, max(40, want, math.ceil(2 * want / share)))
    return VectorPlan("iterative", ef_search=ef, max_scan_tuples=max_scan_tuples)


_GUCS = (
    "set_config('hnsw.iterative_scan', :order, true) || set_config('hnsw.ef_search', :ef, true)"
    " || set_config('hnsw.max_scan_tuples', :mst, true)"
)
"""The GUCs of a VectorPlan's index scan, set for the current transaction only (one expression)."""


def _guc_params(plan: VectorPlan) -> dict[str, str]:
    return {"order": plan.order, "ef": str(plan.ef_search), "mst": str(plan.max_scan_tuples)}


def _statement(sql: str, plan: VectorPlan, namespace: str) -> TextClause:
    """`sql` as a statement; with a `tenant` plan, `:tenant_ns` is `namespace` rendered as a literal (SQLAlchemy
    quotes it). A bound parameter would not do: a partial index is only chosen when the planner sees the value
    its predicate names, and a prepared statement's generic plan does not."""
    stmt = text(sql)
    if plan.mode == "tenant":
        stmt = stmt.bindparams(bindparam("tenant_ns", value=namespace, type_=String(), literal_execute=True))
    return stmt


def _candidate_ctes(
    terms: Sequence[tuple[str, float, bool]],
    params: dict[str, Any],
    table: str,
    tie_break: str,
    *,
    plan: VectorPlan,
    vector_ids: str,
) -> tuple[str, list[str], str]:
    """Both halves of a hybrid statement over `table` (aliased m for memories, e for episodes, r for rounds): the
    expression of a row's keyword value, the CTEs that find candidates (`v` the nearest rows, `k` the best
    keyword matches when a term seeks) and the union of their ids. Adds the terms' parameters to `params`.

    `terms` are (query term, weight, seek) with weights summing to 1. A row's keyword value is the sum of the
    weights of the terms its text contains; only terms with `seek` set propose candidates, ranked by that value,
    then by `tie_break` (a column, newest first). Each term is parsed by PostgreSQL exactly as the row's text
    was, so `node.js` or `c++` match as they were indexed; English words match as prefixes
    (hindsight.textsearch.tsquery_term). `vector_ids` is the vector side by `plan` (`RecallRepository._vector_ids`),
    used as it is unless the plan is `exact`.

    With an `exact` plan both sides come from one read of the namespace's rows (`s`): the exact scan reads them all
    anyway, and testing their text costs less than a second pass through an index. Otherwise the seeking terms are
    looked up in the GIN index of namespaced lexemes (migration 0015_namespace_lexemes), whose posting lists hold
    one namespace's rows each, so that the cost follows the namespace, not the table. The namespace is then only
    a filter (`IS TRUE` hides it from the planner): ANDing the posting lists with the namespace's B-tree entries
    cost 0.7-1.5 ms at 10k rows and removed nothing but another namespace whose hash collides. The (namespace,
    content_tsv) index it replaced decoded a term's posting list over every namespace: 30-60 ms for a common
    word in a table of 1M memories, whatever the namespace's size (BENCHMARKS.md)."""
    alias = {"memories": "m", "episodes": "e", "rounds": "r"}[table]
    matches, seeking = [], []
    for i, (term, weight, seek) in enumerate(terms):
        tsq_text, prefix = tsquery_term(term)
        params[f"t{i}"] = tsq_text
        params[f"w{i}"] = float(weight)
        tsq = f"to_tsquery('simple', :t{i})" if prefix else f"plainto_tsquery('simple', :t{i})"
        matches.append(f"CASE WHEN {alias}.content_tsv @@ {tsq} THEN :w{i} ELSE 0 END")
        if seek:
            seeking.append(tsq)
    kw_expr = "(" + " + ".join(matches) + ")" if matches else "0.0"
    state = f" AND {alias}.state = ANY(:states)" if table == "memories" else ""
    seek_query = " || ".join(seeking)
    if plan.mode == "exact":
        keyword_columns = (
            f", CASE WHEN {alias}.content_tsv @@ ({seek_query}) THEN {kw_expr} END AS kw, {alias}.{tie_break} AS tb"
            if seeking
            else ""
        )
        ctes = [
            f"""s AS MATERIALIZED (
                SELECT {alias}.id, {alias}.embedding <=> CAST(:qv AS halfvec) AS d{keyword_columns}
                FROM {table} {alias}
                WHERE {alias}.namespace = :ns{state}
            )""",
            "v AS (SELECT id FROM s ORDER BY d LIMIT :n)",
        ]
        if seeking:
            ctes.append("k AS (SELECT id FROM s WHERE kw IS NOT NULL ORDER BY kw DESC, tb DESC LIMIT :n)")
    else:
        ctes = [f"v AS ({vector_ids})"]
        if seeking:
            ctes.append(
                f"""k AS (
                SELECT {alias}.id FROM {table} {alias}
                WHERE ({alias}.namespace = :ns) IS TRUE{state}
                  AND hindsight_ns_lexemes({alias}.namespace, {alias}.content_tsv)
                      @@ hindsight_ns_query(:ns, {seek_query})
                ORDER BY {kw_expr} DESC, {alias}.{tie_break} DESC
                LIMIT :n
            )"""
            )
    union = "SELECT id FROM v UNION SELECT id FROM k" if seeking else "SELECT id FROM v"
    return kw_expr, ctes, union


@dataclass
class RecallRepository:
    session: Session
    _searching: tuple[VectorPlan, object] | None = field(default=None, init=False, repr=False)
    """The plan whose GUCs are set, and the transaction they were set in (they last until it ends)."""

    # --- facts the plan depends on (cached per database) -------------------------------------------------

    def _db_key(self) -> str:
        bind = self.session.get_bind()
        return str(bind.engine.url) if hasattr(bind, "engine") else str(bind)

    def sizes(self, namespace: str) -> tuple[int, int]:
        """(memories in the namespace, memories in the table), cached for a minute."""
        return self._sizes_of("memories", namespace)[:2]

    def _sizes_of(self, table: str, namespace: str) -> tuple[int, int, bool]:
        """(rows of `namespace` in `table`, rows in `table`, whether the namespace has a valid index of its own
        there), cached for a minute. `table` is ours, never input."""
        assert table in ("memories", "episodes", "rounds")
        key = (self._db_key(), table, namespace)
        cached = _sizes.get(key)
        if cached is None:
            ns_rows, own = self.session.execute(
                text(
                    f"SELECT count(*), coalesce((SELECT i.indisvalid FROM pg_index i"
                    f" WHERE i.indexrelid = to_regclass(:ix)), false) FROM {table} WHERE namespace = :ns"
                ),
                {"ns": namespace, "ix": index_name(table, namespace)},
            ).one()
            total = self.session.execute(
                text(f"SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = '{table}'::regclass")
            ).scalar_one()
            if total < ns_rows:  # never analysed, or grown since: count for real (small tables only get here)
                total = self.session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            cached = (int(ns_rows), max(int(total), int(ns_rows)), bool(own))
            _sizes.put(key, cached)
        return cached

    def term_counts(
        self, table: str, namespace: str, terms: Sequence[str], *, search: VectorPlan | None = None
    ) -> tuple[int, list[int]]:
        """(rows of `namespace` in `table`, and for each query term how many of those rows contain it).

        With `search`, the same statement also sets that plan's GUCs for the transaction (what `_set_search`
        does in a round trip of its own): recall reads the counts and then searches, in one transaction.

        Read from `namespace_term_counts`, which triggers keep exact per namespace (migration
        0007_namespace_term_counts): a term's weight never depends on another namespace's rows, and there is
        nothing to cache or refresh. A prefix term (textsearch.tsquery_term, `'live':*`) sums the counts of
        the lexemes it covers, one index range; any other term is parsed as the row's text was and counts at
        most the rows holding its rarest lexeme (`qx-48213` is indexed as itself, `qx` and `48213`)."""
        assert table in ("memories", "episodes", "rounds")
        stems: list[str | None] = []
        bounds: list[str | None] = []
        for term in terms:
            tsq_text, prefix = tsquery_term(term)
            stem = tsq_text.removesuffix(":*").strip("'") if prefix else ""
            # Lexemes starting with an ASCII stem sort (bytewise) from the stem up to the stem with its last
            # letter bumped: `live` <= lexeme < `livf`.
            stems.append(stem or None)
            bounds.append(stem[:-1] + chr(ord(stem[-1]) + 1) if stem else None)
        params: dict[str, Any] = {"src": table, "ns": namespace, "terms": list(terms), "los": stems, "his": bounds}
        gucs = ""
        if search is not None and search.mode != "exact":
            gucs = f"SELECT -1 AS i, length({_GUCS}) AS n UNION ALL"
            params.update(_guc_params(search))
        rows = self.session.execute(
            text(
                gucs
                + """
                SELECT 0 AS i, coalesce((SELECT c.rows FROM namespace_term_counts c
                                         WHERE c.source = :src AND c.namespace = :ns AND c.lexeme = ''), 0) AS n
                UNION ALL
                SELECT q.i, CASE WHEN q.hi IS NOT NULL THEN
                    (SELECT coalesce(sum(c.rows), 0) FROM namespace_term_counts c
                     WHERE c.source = :src AND c.namespace = :ns
                       AND c.lexeme >= q.lo COLLATE "C" AND c.lexeme < q.hi COLLATE "C")
                ELSE
                    -- One primary-key probe per lexeme. (A join let the planner, with stale statistics after
                    -- a bulk load, hash the namespace's every lexeme: 15-18 ms at 100k memories, not 0.3.)
                    (SELECT coalesce(min(coalesce(
                        (SELECT c.rows FROM namespace_term_counts c
                         WHERE c.source = :src AND c.namespace = :ns AND c.lexeme = l.lexeme COLLATE "C"), 0)), 0)
                     FROM unnest(tsvector_to_array(to_tsvector('simple', q.term))) AS l(lexeme))
                END
                FROM unnest(CAST(:terms AS text[]), CAST(:los AS text[]), CAST(:his AS text[]))
                     WITH ORDINALITY AS q(term, lo, hi, i)"""
            ),
            params,
        ).all()
        if gucs:
            assert search is not None
            self._searching = (search, self.session.get_transaction())
        by_index = {int(i): int(n) for i, n in rows}
        return by_index[0], [by_index[i + 1] for i in range(len(terms))]

    def vector_plan(
        self,
        namespace: str,
        *,
        want: int,
        exact_max_rows: int,
        max_scan_tuples: int,
        max_ef: int,
        own_index: bool = True,
    ) -> VectorPlan:
        """The plan for `namespace`'s memories (choose_plan); `own_index=False` ignores a tenant index."""
        ns_rows, total, own = self._sizes_of("memories", namespace)
        return choose_plan(
            ns_rows,
            total,
            want=want,
            exact_max_rows=exact_max_rows,
            max_scan_tuples=max_scan_tuples,
            max_ef=max_ef,
            own_index=own and own_index,
        )

    # --- episodes ------------------------------------------------------------------------------------------

    def episode_sizes(self, namespace: str) -> tuple[int, int]:
        """(episodes in the namespace, episodes in the table), cached for a minute."""
        return self._sizes_of("episodes", namespace)[:2]

    def open_conflicts(self, namespace: str, ids: Sequence[uuid.UUID]) -> list[tuple[uuid.UUID, uuid.UUID]]:
        """(older, newer) memory ids of the open conflicts between two of these memories."""
        if len(ids) < 2:
            return []
        sql = """
            SELECT old_memory_id, new_memory_id FROM memory_conflicts
            WHERE namespace = :ns AND resolution = 'open' AND old_memory_id = ANY(:ids) AND new_memory_id = ANY(:ids)
            ORDER BY created_at"""
        rows = self.session.execute(text(sql), {"ns": namespace, "ids": list(ids)})
        return [(r[0], r[1]) for r in rows]

    def memories_of_rounds(self, namespace: str, transcript_ids: Sequence[uuid.UUID]) -> list[dict[str, Any]]:
        """The namespace's memories (active, stale or archived) with provenance in these transcripts: id, key,
        value, state, and the provenance's transcript_id and turn_ids, oldest first."""
        if not transcript_ids:
            return []
        sql = """
            SELECT m.id, m.key, m.value, m.state, p.transcript_id, p.turn_ids
            FROM memory_provenance p JOIN memories m ON m.id = p.memory_id
            WHERE p.transcript_id = ANY(:tids) AND m.namespace = :ns AND m.state IN ('active', 'stale', 'archived')
            ORDER BY m.created_at, m.id"""
        params = {"tids": list(transcript_ids), "ns": namespace}
        return [dict(r) for r in self.session.execute(text(sql), params).mappings()]

    def unit_candidates(
        self,
        table: str,
        namespace: str,
        embedding: Sequence[float],
        terms: Sequence[tuple[str, float, bool]],
        *,
        limit: int,
        exact_max_rows: int,
        max_scan_tuples: int,
        max_ef: int,
        window: tuple[datetime, datetime] | None = None,
        own_index: bool = True,
    ) -> list[dict[str, Any]]:
        """Up to `limit` episodes or rounds (`table`) of `namespace` nearest to `embedding` plus up to `limit` best
        keyword matches, in one statement (EpisodeRead or RoundRead columns, `cosine` and `keyword`, as
        `candidates` does for memories), and, with a `window` (a time the query names), the nearest of the rows
        that took place within it. The vector side uses the same namespace-aware plan as memories
        (ix_episodes_embedding_hnsw, ix_rounds_embedding_hnsw). Erased episodes (no embedding, no text) are left
        out; an exact scan sorts their NULL distances last."""
        cols = _UNIT_COLUMNS[table]
        alias = {"episodes": "e", "rounds": "r"}[table]
        ns_rows, total, own = self._sizes_of(table, namespace)
        plan = choose_plan(
            ns_rows,
            total,
            want=limit,
            exact_max_rows=exact_max_rows,
            max_scan_tuples=max_scan_tuples,
            max_ef=max_ef,
            own_index=own and own_index,
        )
        params: dict[str, Any] = {"ns": namespace, "qv": _vec(embedding), "n": limit}
        vector_ids = self._vector_ids(plan, table, by_state=False)
        kw_expr, ctes, union = _candidate_ctes(terms, params, table, "occurred_at", plan=plan, vector_ids=vector_ids)
        if window is not None:
            params["ws"], params["we"] = window
            # An exact scan of the namespace's rows in the window (ix_{table}_namespace_occurred_at).
            ctes.append(f"""w AS (
                SELECT id FROM {table}
                WHERE namespace = :ns AND occurred_at >= :ws AND occurred_at < :we AND embedding IS NOT NULL
                ORDER BY (embedding <=> CAST(:qv AS halfvec)) + 0
                LIMIT :n
            )""")
            union += " UNION SELECT id FROM w"
        sql = f"""
            WITH {", ".join(ctes)}
            SELECT {cols},
                   1 - ({alias}.embedding <=> CAST(:qv AS halfvec)) AS cosine,
                   {kw_expr} AS keyword
            FROM {table} {alias}
            WHERE {alias}.id IN ({union}) AND {alias}.embedding IS NOT NULL"""
        return [dict(r) for r in self.session.execute(_statement(sql, plan, namespace), params).mappings()]

    def _set_search(self, plan: VectorPlan) -> None:
        """The GUCs an iterative index scan needs, for this transaction only, in one round trip; none when
        `term_counts(search=plan)` already set them in this transaction."""
        if self._searching is not None:
            done, transaction = self._searching
            if done == plan and transaction is not None and transaction is self.session.get_transaction():
                return
        self.session.execute(text(f"SELECT {_GUCS}"), _guc_params(plan))
        self._searching = (plan, self.session.get_transaction())

    # --- the hybrid candidates -----------------------------------------------------------------------------

    def candidates(
        self,
        namespace: str,
        embedding: Sequence[float],
        terms: Sequence[tuple[str, float, bool]],
        *,
        states: Sequence[str],
        limit: int,
        plan: VectorPlan,
    ) -> list[Candidate]:
        """Up to `limit` nearest memories plus up to `limit` best keyword matches (`terms`, see
        `_candidate_ctes`), in one statement."""
        params: dict[str, Any] = {
            "ns": namespace,
            "states": list(states),
            "qv": _vec(embedding),
            "n": limit,
        }
        kw_expr, ctes, union = _candidate_ctes(
            terms, params, "memories", "last_verified_at", plan=plan, vector_ids=self._vector_query(plan)
        )

        cols = ", ".join(_MEMORY_SELECT.get(c, f"m.{c}") for c in MEMORY_COLUMNS)
        sql = f"""
            WITH {", ".join(ctes)}
            SELECT {cols},
                   1 - (m.embedding <=> CAST(:qv AS halfvec)) AS cosine,
                   {kw_expr} AS keyword,
                   (SELECT coalesce(json_agg(json_build_object(
                                'transcript_id', p.transcript_id, 'turn_ids', p.turn_ids,
                                'action', p.action, 'created_at', p.created_at) ORDER BY p.id), '[]'::json)
                    FROM memory_provenance p WHERE p.memory_id = m.id) AS provenance
            FROM memories m LEFT JOIN memory_access a ON a.memory_id = m.id
            WHERE m.id IN ({union})
        """
        out = []
        for r in self.session.execute(_statement(sql, plan, namespace), params).mappings():
            row = {c: r[c] for c in MEMORY_COLUMNS}
            row["provenance"] = r["provenance"]
            out.append(Candidate(row=row, cosine=float(r["cosine"]), keyword=float(r["keyword"] or 0.0)))
        return out

    def _vector_query(self, plan: VectorPlan) -> str:
        """SELECT id of the :n nearest memories of :ns in :states to :qv, by `plan` (sets its GUCs)."""
        return self._vector_ids(plan, "memories", by_state=True)

    def _vector_ids(self, plan: VectorPlan, table: str, *, by_state: bool) -> str:
        """SELECT id of the :n rows of `table` in :ns (in :states when `by_state`) nearest to :qv, by `plan`
        (sets its GUCs). `table` is ours, never input."""
        state = " AND state = ANY(:states)" if by_state else ""
        if plan.mode == "exact":
            # `+ 0` hides the ORDER BY from the HNSW index: an exact scan of the namespace's rows.
            return f"""
                SELECT id FROM {table}
                WHERE namespace = :ns{state}
                ORDER BY (embedding <=> CAST(:qv AS halfvec)) + 0
                LIMIT :n"""
        self._set_search(plan)
        # `tenant`: the namespace as a literal (see _statement), which the partial index's predicate matches.
        ns = ":tenant_ns" if plan.mode == "tenant" else ":ns"
        return f"""
                SELECT id FROM (
                    SELECT id, embedding <=> CAST(:qv AS halfvec) AS d FROM {table}
                    WHERE namespace = {ns}{state}
                    ORDER BY embedding <=> CAST(:qv AS halfvec)
                    LIMIT :n
                ) s ORDER BY d"""

    def nearest(
        self, namespace: str, embedding: Sequence[float], *, states: Sequence[str], limit: int, plan: VectorPlan
    ) -> list[uuid.UUID]:
        """The vector side alone: ids of the `limit` nearest memories by `plan` (benchmarks, diagnostics)."""
        sql = self._vector_query(plan)
        params = {"ns": namespace, "states": list(states), "qv": _vec(embedding), "n": limit}
        return list(self.session.execute(_statement(sql, plan, namespace), params).scalars())

    def exact_neighbours(
        self, namespace: str, embedding: Sequence[float], *, states: Sequence[str], limit: int
    ) -> list[uuid.UUID]:
        """The true nearest memories of the namespace (exact scan): the reference for recall@k."""
        rows = self.session.execute(
            text(
                "SELECT id FROM memories WHERE namespace = :ns AND state = ANY(:states) "
                "ORDER BY (embedding <=> CAST(:qv AS halfvec)) + 0 LIMIT :n"
            ),
            {
                "ns": namespace,
                "states": list(states),
                "qv": _vec(embedding),
                "n": limit,
            },
        ).scalars()
        return list(rows)

    # --- after ranking ---------------------------------------------------------------------------------------

    def add_access_counts(self, counts: Sequence[tuple[uuid.UUID, int, datetime]]) -> int:
        """Add (memory id, accesses, last access) to `memory_access` in one statement; a memory erased since it
        was read is skipped. The memory row itself is not written. The commit does not wait for the WAL flush:
        access counts are statistics, not records. Returns how many memories were counted."""
        if not counts:
            return 0
        self.session.execute(text("SELECT set_config('synchronous_commit', 'off', true)"))
        result = self.session.execute(
            text(
                "INSERT INTO memory_access AS a (memory_id, access_count, last_accessed_at) "
                "SELECT v.id, v.n, v.t "
                "FROM unnest(CAST(:ids AS uuid[]), CAST(:ns AS int[]), CAST(:ts AS timestamptz[])) AS v(id, n, t) "
                "JOIN memories m ON m.id = v.id ORDER BY v.id "
                "ON CONFLICT (memory_id) DO UPDATE SET access_count = a.access_count + excluded.access_count, "
                "last_accessed_at = greatest(a.last_accessed_at, excluded.last_accessed_at)"
            ),
            {"ids": [c[0] for c in counts], "ns": [c[1] for c in counts], "ts": [c[2] for c in counts]},
        )
        return int(getattr(result, "rowcount", 0) or 0)
