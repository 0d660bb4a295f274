"""The three kinds of suite: distill cases, evidence recall (LoCoMo / LongMemEval), MADial retrieval.

Each takes already-validated data and a Runtime, and returns a SuiteResult (metrics + what to print).
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evaluation import store
from evaluation.baselines import BM25Index, DenseIndex, reciprocal_rank_fusion
from evaluation.data import Case, CaseFile, Conversation, MadialMemory, MadialQuery
from evaluation.qa import QA
from evaluation.render import render_episode, render_memory, render_round, render_turn
from evaluation.runtime import Runtime
from evaluation.scoring import (
    RETRIEVAL_BUDGETS,
    CaseScore,
    QueryRun,
    RankedItem,
    budget_recall,
    distill_metrics,
    evidence_scores,
    mean_rows,
    rank_scores,
    score_case,
    within_budget,
)
from hindsight.db.engine import ReadSession
from hindsight.embeddings import cached_embedder
from hindsight.services.context import assembly_order, evidence_stream
from pipeline.wordpiece import count_tokens, tokenizer_name
from schemas.events import TranscriptIn

QUERY_CHARS = 2000
RETRIEVE_DEPTH = 50
"""Memories fetched per question: enough to fill the largest token budget."""


@dataclass
class SuiteResult:
    metrics: dict[str, Any]
    cases: list[CaseScore] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _ns(prefix: str, name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9._:@-]+", "-", name)[:60].strip("-") or "x"
    return f"eval-{prefix}-{clean}-{uuid.uuid4().hex[:8]}"


def _backend_label(rt: Runtime, namespaces: Sequence[str]) -> dict[str, Any]:
    """Which back-end, prompt and model produced the figures: read off the stored rows."""
    from hindsight.db.engine import read_session
    from hindsight.db.repositories import EpisodeRepository

    with read_session(rt.engine) as session:
        produced = EpisodeRepository(session).backends_in(namespaces)
    llm = rt.settings.llm
    return {
        "backend": llm.backend,
        "model": llm.model if llm.backend == "openai" else None,
        "produced_by": produced,
        "embedding_model": rt.settings.embedding.model,
        "retrieval": store.RETRIEVAL,
    }


def _publish_rounds(rt: Runtime, histories: list[list[TranscriptIn]], progress: Progress, description: str) -> None:
    """Post each history's transcripts in order: round n holds every history's n-th transcript."""
    total = sum(len(h) for h in histories)
    task = progress.add_task(description, total=total)
    finished = 0
    rounds = max((len(h) for h in histories), default=0)
    for n in range(rounds):
        batch = [h[n] for h in histories if n < len(h)]

        def on_progress(done: int, before: int = finished) -> None:
            progress.update(task, completed=before + done)

        rt.publish_and_wait(batch, on_progress=on_progress)
        finished += len(batch)
        progress.update(task, completed=finished)


# ---------------------------------------------------------------------------------------------------------
# distill


def run_distill(rt: Runtime, data: CaseFile, *, console: Console, min_score: float | None = 0.0) -> SuiteResult:
    now = datetime.now(UTC)
    embedder = cached_embedder(
        rt.settings.embedding.model, rt.settings.embedding.batch_size, rt.settings.embedding.threads
    )
    from hindsight.db.engine import read_session, session_scope

    namespaces = {c.id: _ns("d", c.id) for c in data.cases}
    prior_ids: dict[str, dict[str, str]] = {}
    with session_scope(rt.engine) as session:
        for case in data.cases:
            vectors = embedder.embed([p.value for p in case.prior]) if case.prior else []
            prior_ids[case.id] = {
                p.ref: str(
                    store.seed_memory(
                        session,
                        namespaces[case.id],
                        key=p.key,
                        value=p.value,
                        kind=p.kind.value,
                        source=p.source.value,
                        confidence=p.confidence,
                        at=now - timedelta(days=p.days_ago),
                        pinned=p.pinned,
                        embedding=vec,
                        embedding_model=embedder.name,
                        now=now,
                    )
                )
                for p, vec in zip(case.prior, vectors, strict=True)
            }

    histories = [
        [_case_event(case, conv, namespaces[case.id], now) for conv in case.conversations] for case in data.cases
    ]
    scores: list[CaseScore] = []
    with _progress(console) as progress:
        _publish_rounds(rt, histories, progress, "distilling conversations")
        task = progress.add_task("scoring cases", total=len(data.cases))
        for case in data.cases:
            ns = namespaces[case.id]
            with read_session(rt.engine) as session:
                memories = store.namespace_memories(session, ns)
                runs = [
                    QueryRun(
                        q,
                        [
                            store.as_stored(h)
                            for h in store.retrieve(
                                session,
                                ns,
                                q.q,
                                embedder=embedder,
                                settings=rt.settings,
                                top_k=q.k,
                                min_score=min_score,
                            )
                        ],
                    )
                    for q in case.expect.queries
                ]
            scores.append(
                score_case(
                    case,
                    memories,
                    runs,
                    prior_ids=prior_ids[case.id],
                    prior_confidence={p.ref: p.confidence for p in case.prior},
                    redteam=data.redteam,
                )
            )
            progress.advance(task)
    metrics = {"suite": "distill", **distill_metrics(scores)}
    metrics["redteam"] = data.redteam
    metrics["query_min_score"] = min_score
    metrics["file"] = str(data.path)
    metrics.update(_backend_label(rt, list(namespaces.values())))
    stored: dict[str, list[str]] = {}
    with read_session(rt.engine) as session:
        for s in scores:
            if not s.passed:
                stored[s.case_id] = [
                    f"[{m.state}{' conflict' if m.has_conflict else ''} {m.confidence:.2f}] {m.key}: {m.value}"
                    for m in store.namespace_memories(session, namespaces[s.case_id])
                ]
    return SuiteResult(metrics=metrics, cases=scores, notes={"stored": stored})


def _case_event(case: Case, conv: Any, namespace: str, now: datetime) -> TranscriptIn:
    return TranscriptIn.model_validate(
        {
            "namespace": namespace,
            "conversation_id": conv.conversation_id,
            "occurred_at": now - timedelta(days=conv.days_ago),
            "turns": [
                {
                    k: v
                    for k, v in t.model_dump().items()
                    if v is not None and k in ("role", "content", "name", "turn_id")
                }
                for t in conv.turns
            ],
        }
    )


# ---------------------------------------------------------------------------------------------------------
# evidence recall: LoCoMo, LongMemEval

SYSTEMS = ("hindsight", "dense_turns", "bm25_turns", "hybrid_turns")
BASELINES = ("dense_turns", "bm25_turns", "hybrid_turns")
VARIANTS = ("hindsight_memories", "hindsight_episodes", "hindsight_rounds")
"""Extra rows: memories alone, episode summaries alone and rounds alone, from the same recalls."""


def run_evidence(
    rt: Runtime,
    conversations: list[Conversation],
    *,
    suite: str,
    console: Console,
    use_episodes: bool = True,
    qa: QA | None = None,
) -> SuiteResult:
    """Evidence recall of every system at every budget; with `qa`, also answer accuracy from hindsight's ranking
    within `qa.budget_tokens` (the items a budget admits, as /context fills one)."""
    from hindsight.db.engine import read_session

    embedder = cached_embedder(
        rt.settings.embedding.model, rt.settings.embedding.batch_size, rt.settings.embedding.threads
    )
    namespaces = {c.conv_id: _ns(suite[:3], c.conv_id) for c in conversations}
    histories = [
        [
            TranscriptIn.model_validate(
                {
                    "namespace": namespaces[c.conv_id],
                    "conversation_id": f"{c.conv_id}/{s.session_id}",
                    "occurred_at": s.occurred_at,
                    "turns": [
                        {"role": t.role, "content": t.text, "turn_id": t.turn_id}
                        | ({"name": t.speaker} if t.speaker not in (t.role, "") else {})
                        for t in s.turns
                    ],
                }
            )
            for s in c.sessions
        ]
        for c in conversations
    ]
    rows: dict[str, list[tuple[str, dict[str, float]]]] = {s: [] for s in SYSTEMS + VARIANTS}
    total_q = sum(len(c.questions) for c in conversations)
    with _progress(console) as progress:
        _publish_rounds(rt, histories, progress, "distilling sessions")
        task = progress.add_task("answering questions", total=total_q)
        for c in conversations:
            if not c.questions:
                continue
            turns = c.turns
            texts = [t.text for _, t in turns]
            rendered = [render_turn(t.text, speaker=t.speaker, at=s.occurred_at) for s, t in turns]
            items = [
                RankedItem(frozenset([t.turn_id]), count_tokens(r)) for (_, t), r in zip(turns, rendered, strict=True)
            ]
            dense = DenseIndex(texts, embedder)
            bm25 = BM25Index(texts)
            ns = namespaces[c.conv_id]
            last = max((s.occurred_at for s in c.sessions if s.occurred_at is not None), default=None)
            for q in c.questions:
                query = q.question[-QUERY_CHARS:]
                asked = q.asked_at or last  # a question without a date is asked after the last session
                qv = embedder.embed([query])[0]
                dense_order = dense.rank(query, RETRIEVE_DEPTH, query_vector=qv)
                bm25_order = bm25.rank(query, RETRIEVE_DEPTH)
                dense_ranking = [items[i] for i in dense_order]
                ref = float(sum(it.tokens for it in dense_ranking[:10]))  # what dense's top 10 costs here
                with read_session(rt.engine) as session:
                    memories, episodes, rounds = _hindsight_rankings(session, ns, query, qv, embedder, rt, asked)
                rankings = {
                    "dense_turns": dense_ranking,
                    "bm25_turns": [items[i] for i in bm25_order],
                    "hybrid_turns": [
                        items[i] for i in reciprocal_rank_fusion([dense_order, bm25_order], RETRIEVE_DEPTH)
                    ],
                    # As /context assembles them (services/context.py), before its budget.
                    "hindsight": assembly_order(
                        memories, evidence_stream(rounds, episodes) if use_episodes else [], _turns
                    ),
                    "hindsight_memories": memories,
                    "hindsight_episodes": episodes,
                    "hindsight_rounds": rounds,
                }
                for system, ranking in rankings.items():
                    rows[system].append((q.category, evidence_scores(q.evidence, ranking, dense_tokens=ref)))
                if qa is not None and q.answer:
                    shown = within_budget(rankings["hindsight"], qa.budget_tokens)
                    qa.score(
                        qid=q.qid,
                        question=q.question,
                        category=q.category,
                        reference=q.answer,
                        context="\n".join(it.text.strip() for it in shown),
                        asked_at=asked,
                    )
                progress.advance(task)
    metrics: dict[str, Any] = {"suite": suite, "questions": len(rows["hindsight"])}
    for s in SYSTEMS + VARIANTS:
        metrics[s] = mean_rows([r for _, r in rows[s]])
    cats = sorted({cat for cat, _ in rows["hindsight"]}, key=lambda x: (len(x), x))
    metrics["by_category"] = {
        cat: {
            s: {**mean_rows([r for c2, r in rows[s] if c2 == cat]), "n": sum(1 for c2, _ in rows[s] if c2 == cat)}
            for s in SYSTEMS + VARIANTS
        }
        for cat in cats
    }
    metrics["vs_best_baseline"] = {
        "all": _vs_best(metrics),
        **{cat: _vs_best(by) for cat, by in metrics["by_category"].items()},
    }
    metrics["conversations"] = len(conversations)
    metrics["tokenizer"] = tokenizer_name()
    metrics["episodes"] = use_episodes
    if qa is not None:
        metrics["qa"] = qa.metrics()
    metrics.update(_backend_label(rt, list(namespaces.values())))
    return SuiteResult(metrics=metrics)


def _vs_best(rows: dict[str, Any]) -> dict[str, float | None]:
    """hindsight's evidence recall at each budget over the best raw-turn baseline's at that budget (None where
    every baseline finds nothing)."""
    out: dict[str, float | None] = {}
    for b in RETRIEVAL_BUDGETS:
        key = f"recall@{b}tok"
        best = max(float(rows[s].get(key) or 0.0) for s in BASELINES)
        out[key] = round(float(rows["hindsight"].get(key) or 0.0) / best, 3) if best else None
    return out


def _turns(item: RankedItem) -> frozenset[str]:
    return item.turn_ids


def _ranked(turn_ids: frozenset[str], text: str, score: float) -> RankedItem:
    return RankedItem(turn_ids, count_tokens(text), score, text)


def _hindsight_rankings(
    session: ReadSession, ns: str, query: str, qv: list[float], embedder: Any, rt: Runtime, now: datetime | None = None
) -> tuple[list[RankedItem], list[RankedItem], list[RankedItem]]:
    """Memories as the API recalls them, and the episode summaries and rounds nearest the query, each with the
    turns it credits."""
    hits = store.retrieve(
        session, ns, query, embedder=embedder, settings=rt.settings, top_k=RETRIEVE_DEPTH, min_score=0.0, now=now
    )
    memories = [_ranked(h.turn_ids, render_memory(h.memory.value, at=h.memory.last_verified_at), h.score) for h in hits]

    def search(unit: Literal["episodes", "rounds"], k: int) -> list[store.ConversationHit]:
        return store.conversation_search(
            unit, session, ns, query, qv, k, embedder=embedder, settings=rt.settings, now=now
        )

    episodes = [_ranked(e.turn_ids, render_episode(e.text, at=e.occurred_at), e.score) for e in search("episodes", 10)]
    rounds = [
        _ranked(r.turn_ids, render_round(r.text, at=r.occurred_at), r.score) for r in search("rounds", RETRIEVE_DEPTH)
    ]
    return memories, episodes, rounds


# ---------------------------------------------------------------------------------------------------------
# MADial


def run_madial(
    rt: Runtime, memories: list[MadialMemory], queries: list[MadialQuery], *, console: Console, mode: str = "user-3"
) -> SuiteResult:
    from hindsight.db.engine import read_session, session_scope

    embedder = cached_embedder(
        rt.settings.embedding.model, rt.settings.embedding.batch_size, rt.settings.embedding.threads
    )
    now = datetime.now(UTC)
    by_user: dict[str, list[MadialMemory]] = defaultdict(list)
    for m in memories:
        by_user[m.user_id].append(m)
    namespaces = {u: _ns("madial", f"user-{u}") for u in by_user}
    carried: dict[str, dict[uuid.UUID, list[str]]] = {}
    rows: dict[str, list[dict[str, float]]] = {"hindsight": [], "dense": [], "bm25": [], "hybrid": []}
    with _progress(console) as progress:
        task = progress.add_task("writing memories", total=len(memories))
        for user, mems in by_user.items():
            with session_scope(rt.engine) as session:
                ids = store.write_memories(
                    session,
                    namespaces[user],
                    # each memory dated by its event, as if written when it happened
                    [(f"user.memory.{m.memory_id}", m.text, m.time) for m in mems],
                    embedder=embedder,
                    settings=rt.settings,
                    now=now,
                )
            mapping: dict[uuid.UUID, list[str]] = defaultdict(list)
            for m, mid in zip(mems, ids, strict=True):
                mapping[mid].append(m.memory_id)
            carried[user] = mapping
            progress.advance(task, len(mems))
        indexes = {
            u: (
                DenseIndex([m.text for m in mems], embedder),
                BM25Index([m.text for m in mems]),
                [m.memory_id for m in mems],
            )
            for u, mems in by_user.items()
        }
        # What each memory costs in a prompt, rendered the same way for every system (date and text).
        cost = {m.memory_id: count_tokens(render_memory(m.text, at=m.time)) for m in memories}
        task = progress.add_task("recalling", total=len(queries))
        for q in queries:
            query = q.query(mode)[-QUERY_CHARS:]
            user = q.user_id if q.user_id in indexes else next(iter(indexes))
            dense, bm25, memory_ids = indexes[user]
            qv = embedder.embed([query])[0]
            dense_order = dense.rank(query, RETRIEVE_DEPTH, query_vector=qv)
            bm25_order = bm25.rank(query, RETRIEVE_DEPTH)
            hybrid_order = reciprocal_rank_fusion([dense_order, bm25_order], RETRIEVE_DEPTH)
            for name, order in (("dense", dense_order), ("bm25", bm25_order), ("hybrid", hybrid_order)):
                ranked_ids = [memory_ids[i] for i in order]
                rows[name].append(rank_scores(q.relevant, ranked_ids, tokens=[cost[i] for i in ranked_ids]))
            with read_session(rt.engine) as session:
                hits = store.retrieve(
                    session,
                    namespaces[user],
                    query,
                    embedder=embedder,
                    settings=rt.settings,
                    top_k=RETRIEVE_DEPTH,
                    min_score=0.0,
                )
            ranked = list(dict.fromkeys(mid for h in hits for mid in carried[user].get(h.memory.id, [])))
            items = [
                RankedItem(frozenset(carried[user].get(h.memory.id, [])), count_tokens(render_memory(
                    h.memory.value, at=h.memory.last_verified_at)))
                for h in hits
            ]  # fmt: skip
            rows["hindsight"].append(rank_scores(q.relevant, ranked) | budget_recall(q.relevant, items))
            progress.advance(task)
    metrics: dict[str, Any] = {"suite": "madial", "queries": len(queries), "memories": len(memories), "query": mode}
    for name, r in rows.items():
        metrics[name] = mean_rows(r)
    metrics.update(
        {
            "embedding_model": rt.settings.embedding.model,
            "retrieval": store.RETRIEVAL,
            "backend": rt.settings.llm.backend,
        }
    )
    return SuiteResult(metrics=metrics)
