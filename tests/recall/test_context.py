"""The context block: real recall hits rendered within token budgets counted by the model family's BPE."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from hindsight.config import RetrievalSettings
from hindsight.errors import InvalidInput
from hindsight.services.context import (
    EPISODES_HEADER,
    HEADER,
    MIN_BUDGET_TOKENS,
    ROUNDS_HEADER,
    assembly_order,
    count_tokens,
    encoding_for_model,
    evidence_stream,
    render_context,
)
from hindsight.services.recall import recall
from schemas.memories import EpisodeRead, RoundRead
from schemas.recall import EpisodeHit, RoundHit

MEMORIES = [
    ("我们的数据库是PostgreSQL 15，生产环境在阿里云上，每天凌晨三点做全量备份", 1, 0.9),
    ("User prefers green tea in the morning and black coffee after lunch", 40, 0.8),
    ("用户对花生过敏，点外卖时要提醒商家不要放花生酱", 3, 0.95),
    ("User lives in Berlin with two cats called Mochi and Bun", 10, 0.6),
    ("The user's team deploys on Kubernetes every Friday afternoon", 0, 0.7),
    ("用户的女儿叫小雨，今年五岁，在上幼儿园大班", 20, 0.85),
    ("User is learning Japanese for a trip to Kyoto next spring", 5, 0.75),
    ("我们的前端用的是 React 18 和 TypeScript 5，状态管理用 Zustand", 2, 0.9),
    ("User runs 5 km every morning before work, usually along the river", 60, 0.9),
    ("User's manager is called Priya; weekly one-on-ones are on Tuesdays", 7, 0.5),
]
MODELS = ["gpt-4o-mini", "gpt-4", "openai/gpt-4.1", "claude-3-5-sonnet", "qwen2.5-72b-instruct"]


@pytest.fixture
def hits(add_memory, session_factory, namespace, embedder):
    for value, days, confidence in MEMORIES:
        add_memory(value, days_ago=days, confidence=confidence)
    with session_factory() as s:
        result = recall(
            s,
            namespace,
            "tell me about the user",
            embedder=embedder,
            settings=RetrievalSettings(),
            top_k=20,
            min_score=0.0,
            record_access=False,
        )
    assert len(result.hits) == len(MEMORIES)
    return result.hits


@pytest.mark.parametrize("model", MODELS)
def test_block_never_exceeds_its_budget(hits, model) -> None:
    shown = []
    for budget in (MIN_BUDGET_TOKENS, 80, 100, 128, 160, 200, 256, 320, 400, 600, 1000, 4000):
        block = render_context(hits, budget_tokens=budget, model=model)
        assert block.tokens == count_tokens(block.text, model)
        assert block.tokens <= budget
        assert len(block.memory_ids) == block.text.count("\n- ")
        assert block.truncated == (len(block.memory_ids) < len(hits))
        shown.append(len(block.memory_ids))
    assert shown == sorted(shown)  # a bigger budget never shows fewer memories
    assert shown[0] < len(hits)
    assert shown[-1] == len(hits)


def test_freshest_and_most_trusted_first_with_age_and_confidence(hits) -> None:
    block = render_context(hits, budget_tokens=4000, model="gpt-4o-mini")
    lines = [line for line in block.text.splitlines() if line.startswith("- ")]
    assert len(lines) == len(MEMORIES)
    by_id = {h.memory.id: h for h in hits}
    order = [by_id[i].parts.recency * by_id[i].parts.trust for i in block.memory_ids]
    assert order == sorted(order, reverse=True)
    assert [i.id for i in block.items] == block.memory_ids
    first = by_id[block.memory_ids[0]].parts
    parts = (first.vector, first.keyword, first.recency, first.trust)
    assert block.items[0].why == "meaning {:.2f}, keywords {:.2f}, recency {:.2f}, trust {:.2f}".format(*parts)
    first = by_id[block.memory_ids[0]]
    assert first.memory.value in lines[0]
    # the freshest well-trusted memory leads, the 60-day-old one is near the end
    assert "Kubernetes" in lines[0] or "PostgreSQL" in lines[0] or "React" in lines[0]
    assert "river" not in lines[0]
    assert any("confidence 0.95" in line and "verified 3 days ago" in line for line in lines)
    assert any("verified today" in line for line in lines)
    assert any("verified 2 months ago" in line or "verified 59 days ago" in line for line in lines)


@pytest.mark.parametrize("budget", [100, 120, 160, 220])
def test_a_small_budget_keeps_the_best_and_leaves_out_only_what_does_not_fit(hits, budget) -> None:
    model = "gpt-4o-mini"
    block = render_context(hits, budget_tokens=budget, model=model)
    assert hits[0].memory.id in block.memory_ids
    kept = [h for h in hits if h.memory.id in block.memory_ids]
    dropped = [h for h in hits if h.memory.id not in block.memory_ids]
    assert dropped
    for h in dropped:  # every memory left out would have pushed the block over its budget
        with_it = render_context([*kept, h], budget_tokens=4000, model=model)
        assert with_it.tokens > budget


def test_empty_hits_give_an_empty_block() -> None:
    block = render_context([], budget_tokens=200, model="gpt-4o-mini")
    assert (block.text, block.tokens, block.memory_ids, block.truncated) == ("", 0, [], False)


def test_token_counts_match_openai_encodings() -> None:
    # Reference token ids from OpenAI's tiktoken README / cookbook.
    assert count_tokens("hello world", "gpt-4") == 2
    assert count_tokens("tiktoken is great!", "gpt-3.5-turbo") == 6
    assert count_tokens("hello world", "gpt-4o") == 2
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("openai/gpt-4") == "cl100k_base"
    assert encoding_for_model("claude-3-5-sonnet") is None
    text = "我们的数据库是 PostgreSQL 15。"
    # other families: a conservative estimate above both OpenAI counts
    assert count_tokens(text, "claude-3-5-sonnet") > max(count_tokens(text, "gpt-4"), count_tokens(text, "gpt-4o"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"budget_tokens": MIN_BUDGET_TOKENS - 1, "model": "gpt-4o-mini"},
        {"budget_tokens": 0, "model": "gpt-4o-mini"},
        {"budget_tokens": "200", "model": "gpt-4o-mini"},
        {"budget_tokens": 200, "model": ""},
    ],
)
def test_bad_budget_or_model_raises_invalid_input(kwargs) -> None:
    with pytest.raises(InvalidInput):
        render_context([], **kwargs)


def _episode(summary: str, days_ago: float, score: float) -> EpisodeHit:
    at = datetime.now(UTC) - timedelta(days=days_ago)
    ep = EpisodeRead(
        id=uuid.uuid4(),
        transcript_id=uuid.uuid4(),
        summary=summary,
        entities=[],
        turn_ids=["0"],
        backend="offline/1",
        occurred_at=at,
        created_at=at,
    )
    return EpisodeHit(episode=ep, score=score, cosine=score / 2, age_days=days_ago)


EPISODES = [
    ("User asked: Can you suggest a packing list? | User said: I just got back from Kyoto where I ran a 10K.", 3),
    ("用户请求：帮我推荐几本历史小说；用户提到：我最近刚读完《夜莺》；助手结论：建议试试《追风筝的人》。", 30),
    ("User said: My sister Ana moved to Porto in May | Assistant concluded: Porto has good train links.", 200),
]


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-3-5-sonnet"])
def test_episodes_follow_the_memories_within_the_budget(hits, model) -> None:
    episodes = [_episode(text, days, 0.9 - i * 0.1) for i, (text, days) in enumerate(EPISODES)]
    shown = []
    for budget in (MIN_BUDGET_TOKENS, 100, 160, 256, 400, 600, 1000, 4000):
        block = render_context(hits, budget_tokens=budget, model=model, episodes=episodes)
        assert block.tokens == count_tokens(block.text, model) <= budget
        assert len(block.memory_ids) + len(block.episode_ids) == block.text.count("\n- ")
        assert block.truncated == (len(block.memory_ids) + len(block.episode_ids) < len(hits) + len(episodes))
        assert (EPISODES_HEADER in block.text) == bool(block.episode_ids)
        if block.episode_ids and block.memory_ids:  # memories first, then the conversations
            assert block.text.index(EPISODES_HEADER) > block.text.index(hits[0].memory.value[:10])
        shown.append(len(block.memory_ids) + len(block.episode_ids))
    assert shown == sorted(shown)
    full = render_context(hits, budget_tokens=4000, model=model, episodes=episodes)
    assert full.episode_ids == [e.episode.id for e in episodes]  # most relevant first
    assert "3 days ago" in full.text
    assert "Kyoto" in full.text
    assert "夜莺" in full.text
    # Admitted one memory, one episode, ...: a budget for about two items holds the best of each.
    small = render_context(hits, budget_tokens=160, model=model, episodes=episodes)
    assert hits[0].memory.id in small.memory_ids
    assert small.episode_ids[:1] == [episodes[0].episode.id]


def test_episodes_alone_make_a_block() -> None:
    episodes = [_episode(EPISODES[0][0], 1, 0.8)]
    block = render_context([], budget_tokens=200, model="gpt-4o-mini", episodes=episodes)
    assert block.memory_ids == []
    assert block.episode_ids == [episodes[0].episode.id]
    assert block.text.startswith(HEADER)
    assert "Kyoto" in block.text


def _round(text: str, days_ago: float, score: float, *, transcript: uuid.UUID, turns: list[str]) -> RoundHit:
    at = datetime.now(UTC) - timedelta(days=days_ago)
    r = RoundRead(
        id=uuid.uuid4(), transcript_id=transcript, seq=0, turn_ids=turns, text=text, occurred_at=at, created_at=at
    )
    return RoundHit(round=r, score=score, cosine=score / 2, age_days=days_ago)


def test_rounds_and_episodes_share_one_ranking_and_never_repeat_a_turn() -> None:
    trip, cake = uuid.uuid4(), uuid.uuid4()
    ep = _episode(EPISODES[0][0], 3, 0.6).model_copy()
    ep.episode.transcript_id, ep.episode.turn_ids = trip, ["0", "1", "2"]
    best = _round(
        "user: I just got back from Kyoto where I ran a 10K.\nassistant: Congrats!",
        3,
        0.8,
        transcript=trip,
        turns=["2", "3"],
    )
    inside = _round(
        "user: Can you suggest a packing list?", 3, 0.5, transcript=trip, turns=["0"]
    )  # the episode shows it
    same_id_elsewhere = _round("user: 我上周烤了一个抹茶蛋糕。", 30, 0.4, transcript=cake, turns=["0"])
    block = render_context(
        [], budget_tokens=4000, model="gpt-4o-mini", episodes=[ep], rounds=[best, inside, same_id_elsewhere]
    )
    assert block.round_ids == [best.round.id, same_id_elsewhere.round.id]  # `inside` carries nothing new
    assert block.episode_ids == [ep.episode.id]
    assert [(i.kind, i.id) for i in block.items] == [
        ("episode", ep.episode.id),
        ("round", best.round.id),
        ("round", same_id_elsewhere.round.id),
    ]
    assert block.items[1].score == best.score
    assert block.items[1].why.startswith("meaning 0.00, keywords 0.00")
    assert not block.truncated
    assert block.text.index(EPISODES_HEADER) < block.text.index(ROUNDS_HEADER)
    assert "I just got back from Kyoto where I ran a 10K. | assistant: Congrats!" in block.text
    assert "抹茶蛋糕" in block.text
    # Under a budget for one item, the best of rounds and episodes by score is the one offered first.
    small = render_context([], budget_tokens=MIN_BUDGET_TOKENS + 30, model="gpt-4o-mini", episodes=[ep], rounds=[best])
    assert small.round_ids == [best.round.id]
    assert small.episode_ids == []
    assert small.truncated


def test_the_assembly_alternates_memories_with_the_best_evidence() -> None:
    class Item:
        def __init__(self, name: str, score: float, turns: list[str]) -> None:
            self.name, self.score, self.turns = name, score, turns

    memories = [Item("m1", 0.9, ["a"]), Item("m2", 0.8, ["b"]), Item("m3", 0.1, ["z"])]
    rounds = [Item("r1", 0.7, ["a", "c"]), Item("r2", 0.3, ["a"])]  # r2 shows only what m1 showed
    episodes = [Item("e1", 0.5, ["d", "e"]), Item("e2", 0.2, ["f"])]
    evidence = evidence_stream(rounds, episodes)
    assert [i.name for i in evidence] == ["r1", "e1", "r2", "e2"]
    order = assembly_order(memories, evidence, lambda i: i.turns)
    assert [i.name for i in order] == ["m1", "r1", "m2", "e1", "m3", "e2"]


def test_rounds_of_one_conversation_share_its_date_and_keep_its_order() -> None:
    trip, cake = uuid.uuid4(), uuid.uuid4()
    later = _round("user: The race started at 7am.", 3, 0.9, transcript=trip, turns=["4"])
    other = _round("user: 我上周烤了一个抹茶蛋糕。", 30, 0.8, transcript=cake, turns=["0"])
    earlier = _round("user: I ran a 10K in Kyoto.", 3, 0.7, transcript=trip, turns=["2"])
    later.round.seq, earlier.round.seq = 4, 2
    block = render_context([], budget_tokens=4000, model="gpt-4o-mini", rounds=[later, other, earlier])
    lines = block.text.split(ROUNDS_HEADER, 1)[1].splitlines()
    assert lines[0].startswith("- (")
    assert lines[0].endswith("user: I ran a 10K in Kyoto.")
    assert lines[1] == "  user: The race started at 7am."  # same conversation: no date again
    assert lines[2].startswith("- (")
    assert "抹茶蛋糕" in lines[2]
    assert block.round_ids == [earlier.round.id, later.round.id, other.round.id]
    assert [i.id for i in block.items] == block.round_ids
