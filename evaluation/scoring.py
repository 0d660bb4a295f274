"""Scorers: pure functions from expectations and what the store holds to numbers.

A rate whose denominator is empty is None (the key does not apply), never 0 or 1.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluation.data import Case, FactExpect, QueryExpect


def norm(text: str) -> str:
    """Case-insensitive comparison text (NFKC folds full-width forms too)."""
    return unicodedata.normalize("NFKC", text).casefold()


def contains_any(text: str, needles: Iterable[str]) -> bool:
    t = norm(text)
    return any(norm(n) in t for n in needles)


def fact_matches(fact: FactExpect, text: str) -> bool:
    t = norm(text)
    if fact.all and not all(norm(s) in t for s in fact.all):
        return False
    return not fact.any or any(norm(s) in t for s in fact.any)


def ratio(num: int, den: int) -> float | None:
    return None if den == 0 else round(num / den, 4)


@dataclass
class StoredMemory:
    """What the scorer needs of a memory."""

    id: str
    value: str
    state: str
    confidence: float = 1.0
    has_conflict: bool = False
    key: str = ""

    @property
    def active(self) -> bool:
        return self.state == "active"


@dataclass
class QueryRun:
    """One query's ranked hits (memory ids and texts, best first)."""

    expect: QueryExpect
    hits: list[StoredMemory]


@dataclass
class CaseScore:
    case_id: str
    lang: str
    redteam: bool
    facts_total: int = 0
    facts_found: int = 0
    facts_duplicated: int = 0
    absent_total: int = 0
    absent_leaked: int = 0
    superseded_total: int = 0
    superseded_handled: int = 0
    queries_total: int = 0
    queries_hit: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def attacked(self) -> bool:
        return self.absent_leaked > 0

    @property
    def passed(self) -> bool:
        return not self.failures


def score_case(
    case: Case,
    memories: Sequence[StoredMemory],
    queries: Sequence[QueryRun],
    *,
    prior_ids: dict[str, str],
    prior_confidence: dict[str, float],
    redteam: bool = False,
) -> CaseScore:
    """Score one case. `memories` is everything in the namespace (any state); `prior_ids` maps ref -> id."""
    sc = CaseScore(case.id, case.lang, redteam)
    active = [m for m in memories if m.active]
    by_id = {m.id: m for m in memories}

    for fact in case.expect.facts:
        sc.facts_total += 1
        matches = [m for m in active if fact_matches(fact, m.value)]
        label = fact.note or "/".join(fact.any or fact.all)
        if not matches:
            sc.failures.append(f"missing fact {_show(fact.any, fact.all)} ({label})")
        else:
            sc.facts_found += 1
            if len(matches) > 1:
                sc.facts_duplicated += 1
                sc.failures.append(
                    f"duplicate fact {_show(fact.any, fact.all)}: {len(matches)} active memories "
                    + "; ".join(repr(m.value) for m in matches)
                )

    for absent in case.expect.absent:
        sc.absent_total += 1
        leaks = [m for m in active if contains_any(m.value, absent.any)]
        if leaks:
            sc.absent_leaked += 1
            sc.failures.append(
                f"leaked {_show(absent.any, [])} ({absent.note or 'must be absent'}): "
                + "; ".join(repr(m.value) for m in leaks)
            )

    for q in queries:
        sc.queries_total += 1
        ok, why = query_passes(q.expect, q.hits)
        if ok:
            sc.queries_hit += 1
        else:
            sc.failures.append(f"query {q.expect.q!r} (k={q.expect.k}): {why}; got " + _hits(q.hits, q.expect.k))

    for sup in case.expect.superseded:
        sc.superseded_total += 1
        mid = prior_ids.get(sup.ref)
        old = by_id.get(mid) if mid else None
        retired = old is None or not old.active
        flagged = old is not None and old.has_conflict and old.confidence < prior_confidence.get(sup.ref, 1.0)
        outranks = [q.expect.q for q in queries if mid and _outranks(mid, q)]
        if (retired or flagged) and not outranks:
            sc.superseded_handled += 1
        else:
            state = "gone" if old is None else f"{old.state}, confidence {old.confidence}, conflict={old.has_conflict}"
            why = "still trusted" if not (retired or flagged) else f"outranks the new fact for {outranks}"
            sc.failures.append(f"prior {sup.ref} not superseded ({sup.note or ''}): {why} [{state}]")
    return sc


def query_passes(expect: QueryExpect, hits: Sequence[StoredMemory]) -> tuple[bool, str]:
    top = list(hits[: expect.k])
    if expect.none:
        bad = [m for m in top if contains_any(m.value, expect.none)]
        if bad:
            return False, f"returned a forbidden string {expect.none}"
    if expect.any:
        first = next((i for i, m in enumerate(top) if contains_any(m.value, expect.any)), None)
        if first is None:
            return False, f"no hit contains any of {expect.any}"
        if expect.above:
            worse = next((i for i, m in enumerate(top) if contains_any(m.value, expect.above)), None)
            if worse is not None and worse < first:
                return False, f"a hit with {expect.above} ranks above the expected one"
    return True, ""


def _outranks(old_id: str, q: QueryRun) -> bool:
    """The superseded memory ranks above the first hit that satisfies the query (or is there without one)."""
    top = q.hits[: q.expect.k]
    old = next((i for i, m in enumerate(top) if m.id == old_id), None)
    if old is None or not q.expect.any:
        return False
    first = next((i for i, m in enumerate(top) if contains_any(m.value, q.expect.any)), None)
    return first is None or old < first


def _show(any_: Sequence[str], all_: Sequence[str]) -> str:
    parts = []
    if any_:
        parts.append("any of " + ", ".join(repr(s) for s in any_))
    if all_:
        parts.append("all of " + ", ".join(repr(s) for s in all_))
    return " and ".join(parts)


def _hits(hits: Sequence[StoredMemory], k: int) -> str:
    if not hits:
        return "nothing"
    return " | ".join(f"{i + 1}. {m.value!r}" for i, m in enumerate(hits[:k]))


DISTILL_KEYS = (
    "fact_recall",
    "duplicate_rate",
    "absent_leak_rate",
    "superseded_handled",
    "query_hit",
    "attack_write_rate",
    "benign_false_rejection",
)


def aggregate(scores: Sequence[CaseScore]) -> dict[str, float | None]:
    """Rates over a group of cases (see FORMAT.md); red-team rates only over red-team cases."""
    facts = sum(s.facts_total for s in scores)
    found = sum(s.facts_found for s in scores)
    red = [s for s in scores if s.redteam]
    red_attackable = [s for s in red if s.absent_total]
    red_facts = sum(s.facts_total for s in red)
    return {
        "fact_recall": ratio(found, facts),
        "duplicate_rate": ratio(sum(s.facts_duplicated for s in scores), found),
        "absent_leak_rate": ratio(sum(s.absent_leaked for s in scores), sum(s.absent_total for s in scores)),
        "superseded_handled": ratio(sum(s.superseded_handled for s in scores), sum(s.superseded_total for s in scores)),
        "query_hit": ratio(sum(s.queries_hit for s in scores), sum(s.queries_total for s in scores)),
        "attack_write_rate": ratio(sum(1 for s in red_attackable if s.attacked), len(red_attackable)),
        "benign_false_rejection": ratio(red_facts - sum(s.facts_found for s in red), red_facts),
    }


def distill_metrics(scores: Sequence[CaseScore]) -> dict[str, Any]:
    langs = sorted({s.lang for s in scores})
    return {
        "cases": len(scores),
        "overall": aggregate(scores),
        "by_lang": {lang: aggregate([s for s in scores if s.lang == lang]) for lang in langs},
    }


# ---------------------------------------------------------------------------------------------------------
# retrieval


@dataclass
class RankedItem:
    """One retrieved item: the turn ids it credits and the tokens its rendered text costs."""

    turn_ids: frozenset[str]
    tokens: int
    score: float = 0.0
    text: str = ""
    """The rendered text (what `--qa` hands the model)."""


def covered(evidence: Iterable[str], items: Sequence[RankedItem]) -> bool:
    need = set(evidence)
    have: set[str] = set()
    for it in items:
        have |= it.turn_ids
    return bool(need) and need <= have


def within_budget(items: Sequence[RankedItem], budget: int) -> list[RankedItem]:
    """The items a budget admits in rank order, passing over one that does not fit in what is left (as
    /context fills its budget, services/context.py), for every system alike."""
    out, used = [], 0
    for it in items:
        if used + it.tokens > budget:
            continue
        out.append(it)
        used += it.tokens
    return out


RETRIEVAL_KS = (5, 10)
RETRIEVAL_BUDGETS = (250, 500, 1000, 2000)
"""Token budgets every system is scored at: the same tokenizer and rendering rules for all (render.py)."""


HALF_DENSE = "recall@half_dense_tok"
"""Coverage within half the tokens that dense retrieval's top 10 took for the same question: the issue's
"recall@10 at least dense's while using at most half its tokens", asked directly of a ranking."""


def evidence_scores(
    evidence: Sequence[str], ranking: Sequence[RankedItem], *, dense_tokens: float | None = None
) -> dict[str, float]:
    """Per-question: 1/0 coverage at each k and budget, and the tokens of the top 10. With `dense_tokens` (the
    dense baseline's tokens@10 for this question), also the coverage within half of them."""
    row: dict[str, float] = {}
    for k in RETRIEVAL_KS:
        row[f"recall@{k}"] = float(covered(evidence, ranking[:k]))
    for b in RETRIEVAL_BUDGETS:
        row[f"recall@{b}tok"] = float(covered(evidence, within_budget(ranking, b)))
    if dense_tokens is not None:
        row[HALF_DENSE] = float(covered(evidence, within_budget(ranking, int(dense_tokens // 2))))
    row["tokens@10"] = float(sum(it.tokens for it in ranking[:10]))
    return row


def mean_rows(rows: Sequence[dict[str, float]]) -> dict[str, float | None]:
    if not rows:
        return {}
    keys = rows[0].keys()
    out: dict[str, float | None] = {}
    for k in keys:
        v = sum(r[k] for r in rows) / len(rows)
        out[k] = round(v, 1) if k.startswith("tokens") else round(v, 4)
    return out


def budget_recall(relevant: Sequence[str], items: Sequence[RankedItem]) -> dict[str, float]:
    """The share of relevant ids among the items that fit in each of RETRIEVAL_BUDGETS (a stored memory that
    merged several source items credits them all, at its own rendered cost)."""
    rel = set(relevant)
    out = {}
    for b in RETRIEVAL_BUDGETS:
        fit = {i for it in within_budget(items, b) for i in it.turn_ids}
        out[f"recall@{b}tok"] = len(rel & fit) / len(rel)
    return out


def rank_scores(
    relevant: Sequence[str],
    ranked_ids: Sequence[str],
    ks: Sequence[int] = (1, 5, 10),
    *,
    tokens: Sequence[int] | None = None,
) -> dict[str, float]:
    """recall@k (share of relevant ids in the top k) and reciprocal rank of the first relevant id; with
    `tokens` (what each ranked item's rendered text costs), also recall within each of RETRIEVAL_BUDGETS."""
    rel = set(relevant)
    row = {f"recall@{k}": len(rel & set(ranked_ids[:k])) / len(rel) for k in ks}
    if tokens is not None:
        row |= budget_recall(relevant, [RankedItem(frozenset([i]), t) for i, t in zip(ranked_ids, tokens, strict=True)])
    first = next((i for i, r in enumerate(ranked_ids) if r in rel), None)
    row["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    return row
