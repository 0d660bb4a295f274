"""The slot registry and everything that reads it: reconcile's key matching and cardinality, full-text topic
words and their reindex job, the lifecycle's per-slot windows, the LLM prompt and key mapping, and the
packaged slot classifier."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from hindsight.config import LifecycleSettings
from hindsight.db.engine import session_scope
from hindsight.services.lifecycle import run_lifecycle
from hindsight.services.reindex import reindex_search_text
from hindsight.textsearch import SEARCH_VOCAB, memory_search_text
from pipeline import slots
from pipeline.llm_backend import registry_key
from pipeline.prompts.distill_v1 import SYSTEM_PROMPT
from pipeline.reconcile import keys_match, reconcile
from pipeline.slot_model import MODEL_PATH, NONE, SlotClassifier, canonical_clause, default_judge
from pipeline.slots import Slot
from schemas.pipeline import CandidateFact, EmbeddedFact, ExistingMemory, MemoryKind, MemoryState, Source
from tests.factories import create_memory

# --- the registry itself ----------------------------------------------------------------------------------


def test_every_alias_names_exactly_one_slot() -> None:
    names = [s.name for s in slots.SLOTS]
    assert len(names) == len(set(names))
    seen: dict[str, str] = {}
    for s in slots.SLOTS:
        for alias in s.aliases:
            assert alias not in names or alias == s.name, f"{alias} is both an alias of {s.name} and a slot"
            assert seen.setdefault(alias, s.name) == s.name, f"{alias} names {seen[alias]} and {s.name}"


def _name(slot: Slot | None) -> str | None:
    return slot.name if slot else None


def test_keys_written_differently_meet_on_their_slot() -> None:
    assert _name(slots.key_slot("user.home_city")) == "city"
    assert _name(slots.key_slot("person:maya.hobbies")) == "hobby"
    assert _name(slots.key_slot("user.diet.spicy_food")) == "diet"
    assert slots.key_slot("user.something_else") is None
    # a browser is a tool the user uses, where the classifier files "I use Firefox" and "我用 Chrome 浏览器"
    assert _name(slots.key_slot("user.browser")) == "stack"
    assert keys_match("user.home_city", "user.city")
    assert keys_match("user.occupation", "user.role")
    assert not keys_match("user.city", "person:maya.city")  # another subject is another memory
    assert not keys_match("user.city", "user.hometown")


def test_topic_words_come_from_the_registry() -> None:
    words = slots.topic_words("user.occupation")  # an alias of role
    assert {"job", "工作"} <= set(words)
    text = memory_search_text("user.role", "User is a nurse")
    assert "occupation" in text
    assert "nurse" in text


def test_the_vocabulary_version_follows_the_words(monkeypatch: pytest.MonkeyPatch) -> None:
    assert slots.vocab_version(slots.SLOTS) == slots.VOCAB_VERSION
    changed = (*slots.SLOTS[:-1], slots.Slot("instruction", MemoryKind.preference, "many", "x", ("rule",)))
    assert slots.vocab_version(changed) != slots.VOCAB_VERSION


def test_the_llm_prompt_lists_every_slot_and_its_keys_map_onto_them() -> None:
    for s in slots.SLOTS:
        assert f"- {s.name} (" in SYSTEM_PROMPT
    assert registry_key("user.occupation") == "user.role"
    assert registry_key("colleague:li.home_city") == "colleague:li.city"
    assert registry_key("user.decision.riverpod") == "user.decision.riverpod"
    assert registry_key("user.unheard_of") == "user.unheard_of"


# --- cardinality decides what a new value does ------------------------------------------------------------


def _fact(key: str, value: str, *, change: bool = False) -> EmbeddedFact:
    fact = CandidateFact(
        kind=MemoryKind.profile,
        key=key,
        value=value,
        source=Source.user,
        confidence=0.8,
        turn_ids=["t0"],
        supersedes_previous=change,
    )
    return EmbeddedFact(fact=fact, embedding=[0.0, 1.0])


def _existing(key: str, value: str) -> ExistingMemory:
    return ExistingMemory(
        id=uuid.uuid4(),
        kind=MemoryKind.profile,
        source=Source.user,
        key=key,
        value=value,
        negated=False,
        state=MemoryState.active,
        pinned=False,
        confidence=0.8,
        embedding=[1.0, 0.0],
    )


def test_a_one_value_slot_is_replaced_and_a_many_value_slot_accumulates() -> None:
    [moved] = reconcile([_fact("user.city", "User lives in Lyon", change=True)],
                        [_existing("user.home_city", "User lives in Paris")], dedupe_threshold=0.9)  # fmt: skip
    assert moved.action == "supersede"
    [second] = reconcile([_fact("user.pet", "User has a parrot named Kiwi")],
                         [_existing("user.pet", "User has a beagle called Biscuit")], dedupe_threshold=0.9)  # fmt: skip
    assert second.action == "insert"


def test_a_change_that_names_the_old_value_retires_it_on_a_many_value_slot() -> None:
    old = _existing("user.stack", "User prefers Polars over pandas")
    [op] = reconcile([_fact("user.stack", "User switched from Polars to DuckDB", change=True)], [old],
                     dedupe_threshold=0.9)  # fmt: skip
    assert op.action == "supersede"
    assert op.target_id == old.id
    other = _existing("user.stack", "User deploys on Fly.io")
    [op] = reconcile([_fact("user.stack", "User switched from Polars to DuckDB", change=True)], [other],
                     dedupe_threshold=0.9)  # fmt: skip
    assert op.action != "supersede"  # names nothing of the other value: that one stays


def test_a_change_filed_under_another_slot_of_the_same_thing_still_retires_the_old_value() -> None:
    # "Took a job in Leeds, moved there in May": the classifier filed it under employer, with city as runner-up.
    york = _existing("user.city", "User lives in York")
    change = _fact("user.employer", "User took a job in Leeds and moved there", change=True)
    change.fact.also_slots = ["city"]
    [op] = reconcile([change], [york], dedupe_threshold=0.9)
    assert op.action == "supersede"
    assert op.target_id == york.id
    # Without a change cue, another slot's memory is not touched.
    calm = _fact("user.employer", "User works for a firm in Leeds")
    calm.fact.also_slots = ["city"]
    [op] = reconcile([calm], [york], dedupe_threshold=0.9)
    assert op.action == "insert"
    # A change that names nothing of a many-valued memory of the other slot leaves it alone ("switched to a
    # standing desk", runner-up habit, beside "runs every morning").
    runs = _existing("user.habit", "User runs every morning")
    desk = _fact("user.possession", "User switched to a standing desk", change=True)
    desk.fact.also_slots = ["habit"]
    [op] = reconcile([desk], [runs], dedupe_threshold=0.9)
    assert op.action == "insert"
    # Nor is one of another subject, or of an unrelated slot.
    sister = _existing("sister.city", "User's sister lives in York")
    [op] = reconcile([change], [sister, _existing("user.pet", "User has a cat")], dedupe_threshold=0.9)
    assert op.action == "insert"


def test_search_text_holds_the_topic_words_of_every_slot_the_value_fills() -> None:
    text = memory_search_text("user.pet", "User has two kids and a dog", ["family"])
    assert "pet" in text
    assert "kids" in text
    assert set(memory_search_text("user.pet", "User has two kids and a dog").split()) < set(text.split())
    family_words = [w for w in slots.topic_words("user.family") if w.isascii()]
    assert family_words
    assert set(family_words) <= set(text.split())


# --- the reindex job ----------------------------------------------------------------------------------------


def _search(engine: sa.Engine, mid: uuid.UUID) -> tuple[str, str | None]:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT search_text, search_vocab FROM memories WHERE id=:i"), {"i": mid}).one()
    return row[0], row[1]


def test_reindex_rebuilds_rows_of_another_vocabulary_once(own_engine: sa.Engine, namespace: str) -> None:
    old = create_memory(own_engine, namespace, key="user.role", value="User is a nurse", search_text="user role nurse")
    current = create_memory(
        own_engine,
        namespace,
        key="user.city",
        value="User lives in Leeds",
        search_text="kept as is",
        search_vocab=SEARCH_VOCAB,
    )
    stale = create_memory(
        own_engine, namespace, key="user.pet", value="User has a cat", search_text="x", search_vocab="old-version"
    )
    two = create_memory(
        own_engine, namespace, key="user.pet", value="User has a dog and a son", also_slots=["family"], search_text="x"
    )
    first = reindex_search_text(own_engine, batch_size=2)
    assert (first.rebuilt, first.batches) == (3, 2)  # old, stale and two; current is left alone
    text, vocab = _search(own_engine, old)
    assert vocab == SEARCH_VOCAB
    assert "occupation" in text
    assert "nurse" in text
    assert _search(own_engine, stale) == (memory_search_text("user.pet", "User has a cat"), SEARCH_VOCAB)
    rebuilt = memory_search_text("user.pet", "User has a dog and a son", ["family"])
    assert _search(own_engine, two) == (rebuilt, SEARCH_VOCAB)  # the other slot's words survive a reindex
    assert _search(own_engine, current) == ("kept as is", SEARCH_VOCAB)  # already current: untouched
    again = reindex_search_text(own_engine)
    assert _search(own_engine, old)[1] == SEARCH_VOCAB
    assert again.rebuilt == 0
    assert all(_search(own_engine, m)[1] == SEARCH_VOCAB for m in (old, stale))


def test_beat_and_the_cli_run_the_reindex_job(services, engine, namespace) -> None:
    import json

    from typer.testing import CliRunner

    from hindsight.cli import app
    from hindsight.config import get_settings
    from workers.celery_app import celery_config
    from workers.tasks import reindex_memories

    schedule = celery_config(get_settings())["beat_schedule"]
    assert isinstance(schedule, dict)
    entry = schedule["reindex"]
    assert entry["task"] == reindex_memories.name == "memories.reindex"
    old = create_memory(engine, namespace, key="user.pet", value="User has a cat", search_text="x")
    result = CliRunner().invoke(app, ["reindex", "--batch-size", "50"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["vocab"] == SEARCH_VOCAB
    assert report["rebuilt"] >= 1
    assert _search(engine, old)[1] == SEARCH_VOCAB


# --- the lifecycle reads per-slot windows ---------------------------------------------------------------------


def test_a_hometown_outlives_its_kinds_window(own_engine: sa.Engine, namespace: str) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    at = now - timedelta(days=400)
    settings = LifecycleSettings(stale_after_days={"profile": 365})
    hometown = create_memory(own_engine, namespace, kind="profile", key="user.hometown", at=at)
    role = create_memory(own_engine, namespace, kind="profile", key="user.role", at=at)
    with session_scope(own_engine) as session:
        report = run_lifecycle(session, settings, now=now)
    assert report.moved == [role]
    with own_engine.connect() as conn:
        states: dict[Any, str] = dict(
            conn.execute(
                sa.text("SELECT id, state FROM memories WHERE id IN (:a, :b)"), {"a": hometown, "b": role}
            ).all()
        )
    assert states[role] == "stale"  # 400 days > profile's 365
    assert states[hometown] == "active"  # the registry gives hometowns 730


# --- the packaged classifier ----------------------------------------------------------------------------------


def test_the_packaged_model_is_small_versioned_and_knows_every_slot_it_predicts() -> None:
    assert MODEL_PATH.stat().st_size <= 20 * 1024 * 1024
    model = SlotClassifier()
    assert model.produced_by.startswith(f"slots-{model.version}-")
    assert NONE in model.classes
    assert all(c == NONE or c in slots.BY_NAME for c in model.classes)
    assert {"seed", "threshold", "data"} <= set(model.meta)


def test_the_packaged_change_model_is_small_versioned_and_named_in_what_the_judge_produces() -> None:
    from pipeline.slot_model import CHANGE, CHANGE_MODEL_PATH, SlotJudge

    assert CHANGE_MODEL_PATH.stat().st_size <= 1024 * 1024
    change = SlotClassifier(CHANGE_MODEL_PATH)
    assert sorted(change.classes) == [CHANGE, NONE]
    assert {"seed", "threshold", "data"} <= set(change.meta)
    judge = default_judge()
    assert judge.change_threshold == change.meta["threshold"]
    assert SlotJudge(glue=False).produced_by == f"{SlotClassifier().produced_by}+{change.produced_by[6:]}"
    assert SlotJudge(change=False, glue=False).produced_by == SlotClassifier().produced_by


def test_the_packaged_glue_model_is_small_versioned_and_named_in_what_the_judge_produces() -> None:
    from pipeline.slot_model import GLUE_MODEL_PATH, PASSING, SlotJudge

    assert GLUE_MODEL_PATH.stat().st_size <= 1024 * 1024
    glue = SlotClassifier(GLUE_MODEL_PATH)
    assert sorted(glue.classes) == [NONE, PASSING]
    assert {"seed", "threshold", "data"} <= set(glue.meta)
    judge = default_judge()
    assert judge.glue_threshold == glue.meta["threshold"]
    assert judge.produced_by.endswith(f"+{glue.produced_by.removeprefix('slots-')}")
    assert SlotJudge(change=False).produced_by == f"{SlotClassifier().produced_by}+{glue.produced_by[6:]}"


def test_the_judge_tells_a_stable_fact_from_chat_in_both_languages() -> None:
    judge = default_judge()
    assert _name(judge.slot("I live in Berlin")) == "city"
    # A clause that states two facts may be filed under either (the annotators accept both).
    assert _name(judge.slot("I live in Berlin with my wife")) in {"city", "family"}
    assert _name(judge.slot("我在上海住了五年了")) == "city"
    assert judge.slot("thanks, that helps a lot") is None
    assert judge.slot("哈哈太好了") is None
    # Edge punctuation and case are not what decides.
    assert canonical_clause("I have two dogs.") == canonical_clause("i have two dogs")
    assert judge.predict("I have two dogs.") == judge.predict("i have two dogs")


def test_features_are_the_same_for_the_same_clause() -> None:
    model = SlotClassifier()
    x = np.ones((1, 512), np.float32) / np.sqrt(512)
    a = model.predict(["I work as a nurse"], x)
    b = model.predict(["I work as a nurse"], x)
    assert a == b


def test_a_change_that_names_nothing_replaces_a_slots_only_value() -> None:
    old = _existing("user.exercise", "用户每周打两次羽毛球")
    [op] = reconcile([_fact("user.exercise", "用户现在改成周末去爬山", change=True)], [old], dedupe_threshold=0.9)
    assert op.action == "supersede"
    assert op.target_id == old.id
    # With two values on the slot, a change that names neither could be from either: both stay.
    other = _existing("user.exercise", "User does yoga on Sundays")
    ops = reconcile([_fact("user.exercise", "用户现在改成周末去爬山", change=True)], [old, other], dedupe_threshold=0.9)
    assert all(op.action != "supersede" for op in ops)


def test_a_change_retires_the_memory_that_names_what_it_replaced_whatever_its_slot() -> None:
    polars = _existing("user.stack", "User prefers Polars over pandas for dataframes")
    other = _existing("user.stack", "User deploys on Fly.io")
    change = _fact("user.programming_language", "User switched from Polars to DuckDB for analysis", change=True)
    [op] = reconcile([change], [polars, other], dedupe_threshold=0.9)
    assert op.action == "supersede"
    assert op.target_id == polars.id
    # Without a change cue, or naming nothing stored, it is a new memory.
    plain = _fact("user.programming_language", "User compared Polars to DuckDB for analysis")
    assert reconcile([plain], [polars], dedupe_threshold=0.9)[0].action == "insert"
    elsewhere = _fact("user.programming_language", "User switched from Julia to Python", change=True)
    assert reconcile([elsewhere], [polars], dedupe_threshold=0.9)[0].action == "insert"


def test_the_classifier_reads_we_as_i() -> None:
    assert canonical_clause("We have two kids.") == canonical_clause("I have two kids")
    assert canonical_clause("我们养了一只猫") == canonical_clause("我养了一只猫")
    assert canonical_clause("We moved to the US") == "i moved to the us"  # "us" is also the US


def test_a_field_label_names_the_slots_of_its_words() -> None:
    assert slots.label_slots("Tech stack") == {"stack"}
    assert "deadline" in slots.label_slots("Due date")
    assert slots.label_slots("数据库") == {"database"}
    assert "deadline" in slots.label_slots("上线时间")
    assert slots.label_slots("Output") == slots.label_slots("Step 1") == slots.label_slots("报错") == frozenset()


def test_slots_read_alike_name_registry_slots_both_ways() -> None:
    """`confused_with` is a relation between two slots: each names a slot of the registry, and the other names it
    back (a change filed under either may retire the other's value)."""
    from pipeline.slots import BY_NAME, SLOTS

    pairs = {(s.name, o) for s in SLOTS for o in s.confused_with}
    assert pairs >= {("role", "employer"), ("os", "device")}
    for a, b in pairs:
        assert b in BY_NAME
        assert (b, a) in pairs
