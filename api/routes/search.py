"""Recall by query: memories (/search), the context block (/context), rounds and episode summaries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from api.deps import EmbedderDep, NamespacePath, ReadSessionDep, SettingsDep
from hindsight.config import Settings
from hindsight.db.engine import ReadSession
from hindsight.services.context import ContextBlock, assemble_context, recall_within_budget
from hindsight.services.recall import MAX_QUERY_CHARS, MAX_TOP_K, recall_episodes, recall_rounds
from pipeline.base import Embedder
from schemas.recall import EpisodeRecallResult, RecallResult, RoundRecallResult

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["memories"])

QueryParam = Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)]
TopKParam = Annotated[int | None, Query(ge=1, le=MAX_TOP_K)]
ModelParam = Annotated[str | None, Query(min_length=1, max_length=200)]


@dataclass(frozen=True)
class RecallQuery:
    """What every recall route takes: the namespace, a read session, the embedder, the settings and `q`."""

    namespace: str
    session: ReadSession
    embedder: Embedder
    settings: Settings
    q: str


def _recall_query(
    namespace: NamespacePath, session: ReadSessionDep, embedder: EmbedderDep, settings: SettingsDep, q: QueryParam
) -> RecallQuery:
    return RecallQuery(namespace, session, embedder, settings, q)


RecallQueryDep = Annotated[RecallQuery, Depends(_recall_query)]


@router.get("/search", response_model=RecallResult)
def search(
    r: RecallQueryDep,
    top_k: TopKParam = None,
    include: Annotated[
        list[Literal["archived", "quarantined"]] | None,
        Query(description="Also search these states (active and stale always are)."),
    ] = None,
    min_score: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    budget_tokens: Annotated[
        int | None,
        Query(ge=64, le=1_000_000, description="Only the hits that fit in this many tokens, as /context renders them."),
    ] = None,
    model: ModelParam = None,
) -> RecallResult:
    """Hybrid recall (vector + keyword + recency + trust) within the namespace, best first; with
    `budget_tokens`, the hits the context block would admit within it (counted with `model`'s tokenizer;
    default llm.model) and the tokens they take."""
    return recall_within_budget(
        r.session,
        r.namespace,
        r.q,
        embedder=r.embedder,
        settings=r.settings.retrieval,
        states=("active", "stale", *(include or ())),
        model=model or r.settings.llm.model,
        budget_tokens=budget_tokens,
        top_k=top_k,
        min_score=min_score,
    )


@router.get("/context", response_model=ContextBlock)
def context(
    r: RecallQueryDep,
    budget_tokens: Annotated[int, Query(ge=64, le=1_000_000)] = 1000,
    model: ModelParam = None,
    top_k: TopKParam = None,
    episodes: Annotated[bool, Query(description="Also summaries of earlier conversations, after the memories.")] = True,
    rounds: Annotated[
        bool, Query(description="Also turns of earlier conversations (a user turn and the start of its reply).")
    ] = True,
) -> ContextBlock:
    """The best memories for `q` (and, unless turned off, the most relevant earlier conversations and
    turns) as a block for the end of a system prompt, within `budget_tokens` (counted with `model`'s
    tokenizer; default llm.model)."""
    return assemble_context(
        r.session,
        r.namespace,
        r.q,
        embedder=r.embedder,
        settings=r.settings.retrieval,
        budget_tokens=budget_tokens,
        model=model or r.settings.llm.model,
        top_k=top_k,
        episodes=episodes,
        rounds=rounds,
    )


@router.get("/rounds/search", response_model=RoundRecallResult)
def search_rounds(r: RecallQueryDep, top_k: TopKParam = None) -> RoundRecallResult:
    """Rounds (a user turn of an earlier conversation and the start of the reply) that best match `q` by
    meaning and keywords, including the facts distilled from them, best first: what was said in passing."""
    return recall_rounds(r.session, r.namespace, r.q, embedder=r.embedder, settings=r.settings.retrieval, top_k=top_k)


@router.get("/episodes/search", response_model=EpisodeRecallResult)
def search_episodes(r: RecallQueryDep, top_k: TopKParam = None) -> EpisodeRecallResult:
    """Episode summaries (what happened in earlier conversations, with the turns they quote) that best match
    `q` by meaning and keywords, best first: for "when did I …" / "what did I say about …", where no stable
    fact was kept."""
    return recall_episodes(r.session, r.namespace, r.q, embedder=r.embedder, settings=r.settings.retrieval, top_k=top_k)
