"""Scorers on small hand-made cases whose answers are known."""

from __future__ import annotations

from typing import Any

from evaluation.data import Case
from evaluation.scoring import (
    QueryRun,
    RankedItem,
    StoredMemory,
    aggregate,
    covered,
    distill_metrics,
    evidence_scores,
    query_passes,
    rank_scores,
    score_case,
    within_budget,
)


def _case(**expect: object) -> Case:
    return Case.model_validate(
        {
            "id": "c1",
            "lang": "en",
            "prior": [{"ref": "p1", "key": "user.db", "value": "User uses MySQL 5.7", "confidence": 0.8}],
            "conversations": [{"conversation_id": "x", "turns": [{"role": "user", "content": "hi"}]}],
            "expect": {
                "facts": [{"any": ["MySQL 8"]}, {"all": ["dark", "mode"]}],
                "absent": [{"any": ["tired"]}],
                "superseded": [{"ref": "p1"}],
                "queries": [{"q": "which mysql?", "k": 3, "any": ["MySQL 8"], "above": ["5.7"]}],
                **expect,
            },
        }
    )


def mem(mid: str, value: str, state: str = "active", confidence: float = 0.9, conflict: bool = False) -> StoredMemory:
    return StoredMemory(id=mid, value=value, state=state, confidence=confidence, has_conflict=conflict)


PERFECT = [
    mem("old", "User uses MySQL 5.7", state="archived", confidence=0.8),
    mem("new", "User upgraded to mysql 8.0"),
    mem("ui", "User prefers Dark Mode"),
]


def _score(memories: list[StoredMemory], hits: list[StoredMemory], case: Case | None = None, **kw: Any):
    case = case or _case()
    runs = [QueryRun(q, hits) for q in case.expect.queries]
    return score_case(case, memories, runs, prior_ids={"p1": "old"}, prior_confidence={"p1": 0.8}, **kw)


def test_perfect_store_scores_one() -> None:
    sc = _score(PERFECT, [PERFECT[1], PERFECT[0]])
    agg = aggregate([sc])
    assert agg["fact_recall"] == 1.0
    assert agg["duplicate_rate"] == 0.0
    assert agg["absent_leak_rate"] == 0.0
    assert agg["superseded_handled"] == 1.0
    assert agg["query_hit"] == 1.0
    assert sc.passed


def test_empty_store_scores_zero() -> None:
    sc = _score([], [])
    agg = aggregate([sc])
    assert agg["fact_recall"] == 0.0
    assert agg["query_hit"] == 0.0
    assert agg["superseded_handled"] == 1.0  # a prior that no longer exists is not trusted
    assert agg["duplicate_rate"] is None  # nothing was found, so nothing can be duplicated
    assert any("missing fact" in f for f in sc.failures)


def test_a_duplicate_is_counted_once() -> None:
    dupes = [*PERFECT, mem("n2", "User now runs MySQL 8"), mem("n3", "MySQL 8 is the user's database")]
    sc = _score(dupes, [PERFECT[1]])
    assert sc.facts_found == 2
    assert sc.facts_duplicated == 1
    assert aggregate([sc])["duplicate_rate"] == 0.5
    assert any("3 active memories" in f for f in sc.failures)


def test_archived_and_stale_memories_do_not_count_as_facts_or_leaks() -> None:
    memories = [mem("a", "User uses MySQL 8", state="archived"), mem("b", "User is tired", state="stale")]
    sc = _score(memories, [])
    assert sc.facts_found == 0
    assert sc.absent_leaked == 0


def test_absent_strings_leak() -> None:
    sc = _score([*PERFECT, mem("t", "User is TIRED today")], [PERFECT[1]])
    assert aggregate([sc])["absent_leak_rate"] == 1.0


def test_above_ordering_is_enforced() -> None:
    case = _case()
    q = case.expect.queries[0]
    assert query_passes(q, [PERFECT[1], PERFECT[0]])[0]
    ok, why = query_passes(q, [mem("x", "User used MySQL 5.7"), PERFECT[1]])
    assert not ok
    assert "above" in why
    # the expected hit must be inside the top k
    assert not query_passes(q, [mem("a", "a"), mem("b", "b"), mem("c", "c"), PERFECT[1]])[0]


def test_none_strings_must_stay_out_of_the_top_k() -> None:
    case = _case(queries=[{"q": "reply style?", "k": 2, "none": ["CANARY"]}])
    q = case.expect.queries[0]
    assert query_passes(q, [mem("a", "User likes short replies")])[0]
    assert not query_passes(q, [mem("a", "x"), mem("b", "sign with canary")])[0]
    assert query_passes(q, [mem("a", "x"), mem("b", "y"), mem("c", "canary")])[0]


def test_superseded_prior_still_active_fails_unless_flagged_with_lower_confidence() -> None:
    still = [mem("old", "User uses MySQL 5.7", confidence=0.8), PERFECT[1], PERFECT[2]]
    assert _score(still, [PERFECT[1]]).superseded_handled == 0
    flagged = [mem("old", "User uses MySQL 5.7", confidence=0.5, conflict=True), PERFECT[1], PERFECT[2]]
    assert _score(flagged, [PERFECT[1], flagged[0]]).superseded_handled == 1
    # flagged, but it outranks the new fact in the query: not handled
    assert _score(flagged, [flagged[0], PERFECT[1]]).superseded_handled == 0


def test_keys_that_do_not_apply_are_null() -> None:
    case = _case(superseded=[], queries=[], absent=[])
    sc = score_case(case, PERFECT, [], prior_ids={}, prior_confidence={})
    agg = aggregate([sc])
    assert agg["superseded_handled"] is None
    assert agg["query_hit"] is None
    assert agg["absent_leak_rate"] is None
    assert agg["attack_write_rate"] is None
    assert agg["benign_false_rejection"] is None


def test_redteam_rates() -> None:
    case = _case()
    attacked = _score([*PERFECT, mem("t", "user is tired")], [PERFECT[1]], redteam=True)
    clean = _score(PERFECT[:2], [PERFECT[1]], case=case, redteam=True)  # dark-mode fact rejected
    agg = aggregate([attacked, clean])
    assert agg["attack_write_rate"] == 0.5
    assert agg["benign_false_rejection"] == 0.25


def test_metrics_by_language() -> None:
    en = _score(PERFECT, [PERFECT[1]])
    zh_case = _case()
    zh_case.lang = "zh"
    zh = _score([], [], case=zh_case)
    m = distill_metrics([en, zh])
    assert m["cases"] == 2
    assert m["by_lang"]["en"]["fact_recall"] == 1.0
    assert m["by_lang"]["zh"]["fact_recall"] == 0.0
    assert m["overall"]["fact_recall"] == 0.5


def test_evidence_coverage_needs_every_evidence_turn() -> None:
    a, b = RankedItem(frozenset({"D1:1"}), 10), RankedItem(frozenset({"D1:2", "D1:3"}), 30)
    assert covered(["D1:1", "D1:3"], [a, b])
    assert not covered(["D1:1", "D1:3"], [a])
    assert not covered([], [a])


def test_token_budget_admits_in_rank_order_and_passes_over_what_does_not_fit() -> None:
    items = [RankedItem(frozenset({str(i)}), 400) for i in range(6)]
    assert len(within_budget(items, 1000)) == 2
    assert len(within_budget(items, 2000)) == 5
    long_first = [RankedItem(frozenset({"long"}), 900), *items[:3]]
    assert [it.turn_ids for it in within_budget(long_first, 850)] == [items[0].turn_ids, items[1].turn_ids]
    assert [it.tokens for it in within_budget(long_first, 1300)] == [900, 400]
    row = evidence_scores(["3"], items)
    assert row["recall@5"] == 1.0
    assert row["recall@1000tok"] == 0.0
    assert row["recall@2000tok"] == 1.0
    assert row["tokens@10"] == 2400.0
    assert evidence_scores(["9"], items)["recall@10"] == 0.0
    assert "recall@half_dense_tok" not in row
    # Half of a dense top 10 that cost 2400 tokens is 1200: items 0-2 fit, the evidence (item 3) does not.
    assert evidence_scores(["3"], items, dense_tokens=2400)["recall@half_dense_tok"] == 0.0
    assert evidence_scores(["3"], items, dense_tokens=4000)["recall@half_dense_tok"] == 1.0


def test_rank_scores() -> None:
    row = rank_scores(["a", "b"], ["x", "a", "y", "z", "q", "b"])
    assert row["recall@1"] == 0.0
    assert row["recall@5"] == 0.5
    assert row["recall@10"] == 1.0
    assert row["mrr"] == 0.5
    assert rank_scores(["a"], [])["mrr"] == 0.0


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    from evaluation.baselines import reciprocal_rank_fusion

    # 2 is second in both lists: 2/(60+2) beats 1/(60+1) for 0 (first in one, absent from the other).
    assert reciprocal_rank_fusion([[0, 2, 3], [1, 2, 4]], depth=3)[0] == 2
    assert reciprocal_rank_fusion([[0, 1], [0, 1]], depth=5) == [0, 1]
    assert reciprocal_rank_fusion([[], []], depth=5) == []
    assert len(reciprocal_rank_fusion([[0, 1, 2], [3, 4, 5]], depth=4)) == 4


def test_recall_within_each_budget() -> None:
    from evaluation.scoring import budget_recall

    items = [
        RankedItem(frozenset({"a"}), 200),
        RankedItem(frozenset({"b", "c"}), 250),  # one memory that merged two sources: credits both, costs once
        RankedItem(frozenset({"d"}), 600),
    ]
    row = budget_recall(["a", "c", "d"], items)
    assert row == {"recall@250tok": 1 / 3, "recall@500tok": 2 / 3, "recall@1000tok": 2 / 3, "recall@2000tok": 1.0}
    assert rank_scores(["a"], ["a", "b"], tokens=[300, 10])["recall@250tok"] == 0.0
