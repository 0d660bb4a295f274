"""Rounds: one per user turn, with the start of the turn that answered it, keyed by the facts taken from it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from pipeline.rounds import MAX_ROUNDS, REPLY_CHARS, split_rounds
from schemas.pipeline import Role, Transcript, Turn


def _transcript(*turns: tuple[str, str] | tuple[str, str, str]) -> Transcript:
    return Transcript(
        id=uuid.uuid4(),
        namespace="ns",
        conversation_id="c",
        occurred_at=datetime(2026, 5, 1, tzinfo=UTC),
        turns=[
            Turn(index=i, turn_id=f"t{i}", role=Role(t[0]), content=t[1], name=t[2] if len(t) > 2 else None)
            for i, t in enumerate(turns)
        ],
    )


def test_each_user_turn_is_a_round_with_the_start_of_its_reply() -> None:
    reply = "Great choice. " * 40
    rounds = split_rounds(
        _transcript(("user", "I adopted a greyhound called Pixel."), ("assistant", reply), ("user", "Thanks!"))
    )
    assert [r.turn_ids for r in rounds] == [["t0", "t1"], ["t2"]]
    assert [r.seq for r in rounds] == [0, 2]
    first = rounds[0].text.splitlines()
    assert first[0] == "user: I adopted a greyhound called Pixel."
    assert first[1].startswith("assistant: Great choice.")
    assert len(first[1]) <= len("assistant: ") + REPLY_CHARS
    assert first[1].endswith("…")
    assert reply.split()[-1] in rounds[0].key  # the key keeps the whole reply for full-text search


def test_tool_and_system_turns_neither_start_nor_answer_a_round() -> None:
    rounds = split_rounds(
        _transcript(
            ("system", "You are helpful."),
            ("user", "What's the weather in Lyon?"),
            ("tool", "Lyon: 18C, cloudy", "weather"),
            ("assistant", "It is 18 degrees."),
            ("user", "   "),
        )
    )
    assert [r.turn_ids for r in rounds] == [["t1"]]
    assert "18C" not in rounds[0].key


def test_in_a_chat_between_two_people_the_other_persons_turn_answers() -> None:
    rounds = split_rounds(
        _transcript(
            ("user", "I painted a sunset last weekend.", "Caroline"),
            ("user", "我也想学画画，你用的是油画吗？", "Melanie"),
        )
    )
    assert [r.turn_ids for r in rounds] == [["t0", "t1"], ["t1"]]
    assert rounds[0].text == "Caroline: I painted a sunset last weekend.\nMelanie: 我也想学画画，你用的是油画吗？"


def test_the_facts_taken_from_a_round_are_in_its_key_not_in_its_text() -> None:
    fact = (["t2"], "User lives in Leeds")
    rounds = split_rounds(
        _transcript(
            ("user", "Hi"), ("assistant", "Hello!"), ("user", "We finally settled in Leeds."), ("assistant", "Nice")
        ),
        [fact, fact],
    )
    assert "User lives in Leeds" not in rounds[0].key
    assert rounds[1].key.count("User lives in Leeds") == 1
    assert "User lives in" not in rounds[1].text


def test_a_pasted_log_keeps_only_the_last_rounds() -> None:
    rounds = split_rounds(_transcript(*[("user", f"line {i}") for i in range(MAX_ROUNDS + 5)]))
    assert len(rounds) == MAX_ROUNDS
    assert rounds[-1].seq == MAX_ROUNDS + 4
