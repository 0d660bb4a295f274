import math
import uuid

import pytest

from pipeline.reconcile import SOURCE_CONFIDENCE_CAP, canonical_key, keys_match, reconcile
from schemas.pipeline import (
    CandidateFact,
    EmbeddedFact,
    ExistingMemory,
    MemoryKind,
    MemoryState,
    Source,
)

T = 0.9


def vec(angle_deg: float) -> list[float]:
    """A unit vector in 3-d; the cosine of two of them is cos(angle difference)."""
    a = math.radians(angle_deg)
    return [math.cos(a), math.sin(a), 0.0]


def fact(key: str, value: str, angle: float, **kw: object) -> EmbeddedFact:
    data: dict[str, object] = {
        "kind": MemoryKind.fact,
        "key": key,
        "value": value,
        "source": Source.user,
        "confidence": 0.8,
        "turn_ids": ["1"],
    }
    data.update(kw)
    return EmbeddedFact(fact=CandidateFact.model_validate(data), embedding=vec(angle))


def mem(key: str, value: str, angle: float, **kw: object) -> ExistingMemory:
    data: dict[str, object] = {
        "id": uuid.uuid4(),
        "kind": MemoryKind.fact,
        "key": key,
        "value": value,
        "source": Source.user,
        "confidence": 0.8,
        "state": MemoryState.active,
        "embedding": vec(angle),
    }
    data.update(kw)
    return ExistingMemory.model_validate(data)


def test_paraphrase_same_key_refreshes() -> None:
    old = mem("user.editor", "User prefers dark mode in the editor", 0)
    [op] = reconcile([fact("user.editor", "User likes a dark theme in the editor", 10)], [old], dedupe_threshold=T)
    assert op.action == "refresh"
    assert op.target_id == old.id
    assert op.new_id is None


def test_neighbour_paraphrase_without_key_refreshes() -> None:
    old = mem("user.misc.theme", "用户喜欢深色主题", 0)
    [op] = reconcile([fact("user.preference.theme", "用户偏爱深色主题", 5)], [old], dedupe_threshold=T)
    assert op.action == "refresh"
    assert op.target_id == old.id


def test_negation_is_never_merged_into_its_opposite() -> None:
    old = mem("user.allergy.penicillin", "User is allergic to penicillin", 0)
    near = fact("user.health.penicillin", "User is not allergic to penicillin", 3, negated=True)
    [op] = reconcile([near], [old], dedupe_threshold=T)
    assert op.action == "insert"  # cosine 0.999 but opposite polarity: never a refresh/merge
    same_key = fact("user.allergy.penicillin", "User is not allergic to penicillin", 3, negated=True)
    [op2] = reconcile([same_key], [old], dedupe_threshold=T)
    assert op2.action == "conflict"
    assert op2.target_id == old.id
    assert op2.new_confidence is not None
    assert op2.new_confidence < old.confidence


def test_seeded_negation_in_text_counts_even_without_flag() -> None:
    old = mem("user.diet", "User does not eat pork", 0)
    [op] = reconcile([fact("user.diet", "User eats pork", 2)], [old], dedupe_threshold=T)
    assert op.action == "conflict"


def test_version_difference_is_a_conflict_not_a_refresh() -> None:
    old = mem("user.database", "用户在用 PostgreSQL 14", 0)
    [op] = reconcile([fact("user.database", "用户在用 PostgreSQL 16", 2)], [old], dedupe_threshold=T)
    assert op.action == "conflict"
    assert op.new_confidence == round(0.8 * 0.6, 4)
    assert op.new_id is not None


def test_number_difference_between_neighbours_inserts() -> None:
    old = mem("user.habit.run", "User runs 5 km every morning", 0)
    [op] = reconcile([fact("user.exercise.run", "User runs 10 km every morning", 2)], [old], dedupe_threshold=T)
    assert op.action == "insert"


def test_change_cue_supersedes() -> None:
    old = mem("user.home_city", "User lives in Leeds", 0)
    new = fact("user.city", "User moved to Glasgow last year", 40, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert op.action == "supersede"
    assert op.target_id == old.id
    assert op.new_id is not None


def test_pinned_memory_is_never_superseded() -> None:
    old = mem("user.city", "User lives in Leeds", 0, pinned=True)
    new = fact("user.city", "User moved to Glasgow last year", 40, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert op.action == "conflict"
    assert "pinned" in op.reason


def test_refinement_merges() -> None:
    old = mem("user.database", "User prefers PostgreSQL", 0)
    new = fact("user.database", "User prefers PostgreSQL, now on PostgreSQL 16 with pgvector", 30)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert op.action == "merge"
    assert op.target_id == old.id
    assert op.merged_value is not None
    assert "16" in op.merged_value
    assert "PostgreSQL" in op.merged_value


def test_quarantined_never_touches_active_memories() -> None:
    old = mem("user.billing_email", "User sends invoices to ana@example.org", 0)
    poison = fact(
        "user.billing_email",
        "User sends invoices to ana@example.org",
        0,
        source=Source.tool,
        state=MemoryState.quarantined,
        confidence=0.9,
    )
    [op] = reconcile([poison], [old], dedupe_threshold=T)
    assert op.action == "insert"
    assert op.target_id is None
    assert op.fact.confidence <= SOURCE_CONFIDENCE_CAP[Source.tool]
    assert op.fact.state is MemoryState.quarantined


def test_tool_fact_posing_as_active_is_quarantined_and_capped() -> None:
    [op] = reconcile([fact("user.diet", "User is vegan", 0, source=Source.tool)], [], dedupe_threshold=T)
    assert op.fact.state is MemoryState.quarantined
    assert op.fact.confidence == SOURCE_CONFIDENCE_CAP[Source.tool]


def test_confidence_capped_by_source() -> None:
    [op] = reconcile([fact("user.x", "v", 0, source=Source.assistant, confidence=0.99)], [], dedupe_threshold=T)
    assert op.fact.confidence == SOURCE_CONFIDENCE_CAP[Source.assistant]


def test_later_candidates_see_earlier_ops() -> None:
    a = fact("user.editor", "User codes in Helix", 0)
    b = fact("user.editor", "User codes in Helix", 1)
    first, second = reconcile([a, b], [], dedupe_threshold=T)
    assert first.action == "insert"
    assert first.new_id is not None
    assert second.action == "refresh"
    assert second.target_id == first.new_id


def test_superseded_memory_is_not_a_target_again() -> None:
    old = mem("user.city", "User lives in Leeds", 0)
    move = fact("user.city", "User moved to Glasgow", 40, supersedes_previous=True)
    again = fact("user.city", "User lives in Leeds", 0)
    ops = reconcile([move, again], [old], dedupe_threshold=T)
    assert ops[0].action == "supersede"
    assert ops[1].target_id != old.id


def test_archived_memories_are_ignored() -> None:
    old = mem("user.city", "User lives in Leeds", 0, state=MemoryState.archived)
    [op] = reconcile([fact("user.city", "User lives in Leeds", 0)], [old], dedupe_threshold=T)
    assert op.action == "insert"


def test_key_synonyms() -> None:
    assert keys_match("user.home_city", "user.city")
    assert keys_match("user.db_preference", "user.database")
    assert not keys_match("user.project", "user.project.deadline")
    assert canonical_key("daughter:mia.allergy") == ("daughter:mia", ("allergy",))
    # writers qualify a slot with words of their own: those keys are the slot's
    assert keys_match("user.language_learning", "user.language")
    assert keys_match("user.preferred_name", "user.name")
    assert keys_match("user.phone_model", "user.phone")
    assert keys_match("user.cloud_provider", "user.cloud")
    assert not keys_match("user.language_learning", "user.city")
    # two slots in one key: the last names the thing (an English compound's head), unless the whole is a slot
    assert keys_match("user.company.cloud", "user.cloud")
    assert keys_match("user.work_stack", "user.stack")
    assert canonical_key("user.programming_language")[1][0] == "programming_language"
    # a key that is a slot's alias as a whole is that slot, not what its words name one by one
    assert keys_match("user.home_town", "user.hometown")
    assert not keys_match("user.home_town", "user.city")
    assert keys_match("user.previous_role", "user.background")
    assert not keys_match("user.previous_role", "user.role")
    assert keys_match("user.marital_status", "user.family")
    assert keys_match("user.commute", "user.habit")  # how they get to work is a routine
    assert keys_match("user.hosting", "user.stack")
    assert keys_match("user.lives_with", "user.family")
    assert not keys_match("user.lives_with", "user.city")


def test_a_new_job_leaves_the_previous_job_alone() -> None:
    """`previous_role` is the user's past: a new role replaces the current one, never what they used to do."""
    past = mem("user.previous_role", "User used to be a teacher", 0)
    now = mem("user.role", "User is a nurse", 0)
    ops = reconcile(
        [fact("user.role", "User is now a paramedic", 60, supersedes_previous=True)], [past, now], dedupe_threshold=T
    )
    assert {op.target_id for op in ops if op.target_id} == {now.id}


def test_another_value_of_a_many_valued_key_is_its_own_memory() -> None:
    old = mem("user.hobby", "User paints watercolours on weekends", 0)
    [op] = reconcile([fact("user.hobby", "User plays the violin", 60)], [old], dedupe_threshold=T)
    assert op.action == "insert"
    assert op.new_id is not None
    assert op.target_id is None
    assert "many-valued" in op.reason


def test_a_related_refinement_of_a_many_valued_key_still_merges() -> None:
    old = mem("user.hobby", "User paints watercolours", 0)
    [op] = reconcile([fact("user.hobby", "User paints watercolours of the Alps", 20)], [old], dedupe_threshold=T)
    assert op.action == "merge"
    assert op.merged_value == "User paints watercolours of the Alps"


def test_a_change_from_the_old_one_retires_a_many_valued_slots_only_value_and_one_from_another_does_not() -> None:
    """ "moved from our old host to X" names its source only as the one held: it retires the slot's only value, as a
    change that names no source does. A change from something else leaves that value alone."""
    old = mem("user.stack", "User's team deploys on Render", 0)
    moved = fact("user.stack", "User's team moved from the user's old host to Fly.io", 70, supersedes_previous=True)
    [op] = reconcile([moved], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id), op.reason
    old_zh = mem("user.stack", "用户团队用 Jenkins 跑构建", 0)
    moved_zh = fact("user.stack", "用户团队从原来的方案换成了 GitHub Actions", 70, supersedes_previous=True)
    [op] = reconcile([moved_zh], [old_zh], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old_zh.id), op.reason
    other = fact("user.stack", "User's team moved from Jenkins to GitHub Actions", 70, supersedes_previous=True)
    [op] = reconcile([other], [old], dedupe_threshold=T)
    assert op.action != "supersede", op.reason


def test_merged_values_stay_short() -> None:
    from pipeline.reconcile import MAX_MERGED_CHARS

    old = mem("user.hobby", "User likes hiking in the mountains with friends " * 4, 0)
    new = fact("user.hobby", "User likes hiking in the desert at night", 40)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert len(old.value) + len(new.fact.value) > MAX_MERGED_CHARS
    assert op.action == "insert"
    assert op.merged_value is None


def test_single_valued_key_with_a_new_value_is_still_a_conflict() -> None:
    old = mem("user.city", "User lives in Lisbon", 0)
    [op] = reconcile([fact("user.city", "User lives in Porto", 40)], [old], dedupe_threshold=T)
    assert op.action == "conflict"


def test_a_one_value_slot_whose_new_value_drops_the_old_words_is_contradicted() -> None:
    """Job titles and other named values are common nouns as often as names: "a backend engineer" and "the
    engineering manager" are two values of one role, not one refined; a paraphrase that keeps the old value's
    words, or a free-worded slot (how to answer), is not."""
    old = mem("user.role", "User is a backend engineer", 0)
    new = "Since the user's promotion User is the engineering manager for the platform team"
    [op] = reconcile([fact("user.role", new, 40)], [old], dedupe_threshold=T)
    assert op.action == "conflict"
    zh = mem("user.role", "用户是后端工程师", 0)
    [op] = reconcile([fact("user.role", "升职以后用户做技术经理了", 40)], [zh], dedupe_threshold=T)
    assert op.action == "conflict"
    city = mem("user.city", "User lives in Boston", 0)
    [op] = reconcile([fact("user.city", "User is based in Boston, near the harbor", 40)], [city], dedupe_threshold=T)
    assert op.action == "merge"
    style = mem("user.answer_style", "用户希望回答简洁，先给结论再解释", 0)
    [op] = reconcile([fact("user.answer_style", "第一句话就给答案，原因放后面", 40)], [style], dedupe_threshold=T)
    assert op.action != "conflict"


def test_a_team_slot_is_one_slot_whoever_wrote_its_key() -> None:
    """The offline extractor files "we moved the database" under user.database; an LLM or a manual write may say
    team.database. For a slot a team can hold they are one slot; for one it cannot (a role), they stay apart."""
    assert keys_match("team.database", "user.database")
    assert not keys_match("team.role", "user.role")
    old = mem("team.database", "团队使用 MySQL 5.7", 0)
    new = fact("user.database", "用户团队上季度把库从 MySQL 迁到 PostgreSQL 16 了", 40, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)


def test_a_change_naming_its_chinese_source_retires_the_memory_that_holds_it() -> None:
    # "从后端转岗到…": the verb before 到 is not part of the source, and a Chinese term is found inside a word.
    role = mem("user.role", "用户是 Java 后端开发", 0)
    new = fact("user.project", "用户从后端转岗到算法组了", 60, supersedes_previous=True)
    [op] = reconcile([new], [role], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", role.id)


def test_a_name_said_in_lower_case_is_the_same_value() -> None:
    """ "Emacs" (a name) and "emacs" (a word) are one specific: restating it with a detail is no contradiction."""
    old = mem("user.editor", "User uses Emacs", 0)
    [op] = reconcile([fact("user.editor", "User is a longtime emacs user", 50)], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("merge", old.id)
    [op] = reconcile([fact("user.editor", "User uses Vim", 50)], [old], dedupe_threshold=T)
    assert op.action == "conflict"


def test_a_change_that_names_what_it_gave_up_retires_it_under_another_key() -> None:
    """ "Spanish didn't stick, doing Japanese now" filed under language retires "learning Spanish" (learning)."""
    old = mem("user.learning", "User is learning Spanish", 0)
    other = mem("user.city", "User lives in Seville", 5)
    new = fact(
        "user.language", "Spanish honestly didn't stick, User is doing Japanese now", 60, supersedes_previous=True
    )
    [op] = reconcile([new], [old, other], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)
    # "migrating off Mongo": a name of five letters or more names what it begins (MongoDB).
    db = mem("team.database", "User's team uses MongoDB", 0)
    moved = fact(
        "user.stack", "User's team finished migrating off Mongo onto Postgres 16", 60, supersedes_previous=True
    )
    [op] = reconcile([moved], [db], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", db.id)


def test_a_change_that_names_nothing_a_memory_holds_retires_nothing_under_another_key() -> None:
    hobby = mem("user.hobby", "User plays chess on weekends", 0)
    new = fact("user.exam", "User gave up on the CFA, doing ACCA instead", 80, supersedes_previous=True)  # far apart
    [op] = reconcile([new], [hobby], dedupe_threshold=T)
    assert op.action == "insert"


def test_a_correction_that_denies_the_old_value_supersedes_it_without_a_change_cue() -> None:
    old = mem("user.allergy", "User is allergic to peanuts", 0)
    new = fact("user.allergy", "It's cashews User is allergic to, not peanuts", 20)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)
    # A contrast that names something else is no correction of this memory: a refinement merges.
    city = mem("user.city", "User lives in Leeds", 0)
    [op] = reconcile(
        [fact("user.city", "User lives in Leeds, not far from the station", 10)], [city], dedupe_threshold=T
    )
    assert op.action in ("merge", "refresh")


def test_a_compound_names_its_head_when_a_change_gives_it_up() -> None:
    old = mem("user.pet", "User keeps a goldfish tank", 0)
    new = fact("user.pet", "User rehomed the fish when the puppy arrived", 60, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)


def test_a_tool_said_to_be_uninstalled_is_retired() -> None:
    """ "Cursor 用顺手了，VS Code 已经卸了": the object before 卸了 is what the change removed."""
    old = mem("user.editor", "用户使用 VS Code 写代码", 0)
    new = fact("user.editor", "用户Cursor 用顺手了，VS Code 已经卸了", 50, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)


def test_what_a_change_left_may_be_called_the_old_one() -> None:
    """ "in the new flat instead of the old houseshare": "old" says which one, the houseshare is what was left."""
    old = mem("user.living_situation", "User lives in a houseshare with three flatmates", 0)
    new = fact(
        "user.goal", "It's just the user and the user's partner in the new flat instead of the old houseshare", 60
    )
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)


def test_a_memory_under_another_slot_that_says_it_all_is_refreshed() -> None:
    """Far apart in embedding space (60°), filed under two slots: still one fact, so one memory."""
    old = mem("user.hobby", "User likes sailing, chess and baking sourdough bread", 0)
    [op] = reconcile([fact("user.food", "User loves baking sourdough", 60)], [old], dedupe_threshold=T)
    assert op.action == "refresh"
    assert op.target_id == old.id


def test_a_value_that_repeats_another_slots_memory_and_adds_to_it_takes_its_place() -> None:
    old = mem("user.exercise", "用户喜欢攀岩", 0)
    [op] = reconcile([fact("user.hobby", "用户喜欢攀岩和摄影", 60)], [old], dedupe_threshold=T)
    assert op.action == "merge"
    assert op.target_id == old.id
    assert op.merged_value == "用户喜欢攀岩和摄影"


def test_covering_needs_a_claim_not_a_topic_word_and_keeps_polarity_numbers_and_subject() -> None:
    cases = [
        # One shared word is a topic, not a claim: owning a cat is not liking cats.
        (mem("user.preference", "User loves cats", 0), fact("user.pet", "User has a cat", 60)),
        (mem("user.employer", "User works in Paris", 0), fact("user.city", "User lives in Paris", 60)),
        # A different word that begins the same is a different thing (猫 / 猫头鹰).
        (mem("user.preference", "用户喜欢猫头鹰", 0), fact("user.pet", "用户喜欢猫", 60)),
        # Polarity, numbers and subject.
        (mem("user.preference", "User does not like jazz piano", 0), fact("user.music", "User likes jazz piano", 60)),
        (mem("user.pet", "User has three rescue dogs", 0), fact("user.preference", "User has two rescue dogs", 60)),
        (mem("sister.hobby", "User's sister likes sailing and chess", 0), fact("user.hobby", "User likes sailing", 60)),
    ]
    for old, new in cases:
        [op] = reconcile([new], [old], dedupe_threshold=T)
        assert op.action == "insert", (old.value, new.fact.value, op.reason)


def test_a_pinned_memory_is_refreshed_by_what_it_covers_but_never_rewritten() -> None:
    old = mem("user.hobby", "User likes sailing", 0, pinned=True)
    [op] = reconcile([fact("user.exercise", "User likes sailing and rowing", 60)], [old], dedupe_threshold=T)
    assert op.action == "insert"
    wide = mem("user.hobby", "User likes sailing and rowing", 0, pinned=True)
    [op] = reconcile([fact("user.exercise", "User likes sailing", 60)], [wide], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("refresh", wide.id)


def test_each_statement_a_memory_already_makes_refreshes_it_and_the_rest_is_decided_alone() -> None:
    old = mem("user.role", "User is a welder; User likes night shifts", 0)
    new = fact("user.role", "User is a welder; User is saving for a boat", 60)
    refresh, rest = reconcile([new], [old], dedupe_threshold=T)
    assert (refresh.action, refresh.target_id, refresh.fact.value) == ("refresh", old.id, "User is a welder")
    assert rest.fact.value == "User is saving for a boat"
    assert rest.target_id == old.id or rest.action == "insert"
    # A caller's own write is one decision, under the key the caller chose.
    [one] = reconcile([new], [old], dedupe_threshold=T, by_statement=False)
    assert one.fact.value == new.fact.value
    hobby = mem("user.hobby", "User likes sailing and chess", 0)
    [write] = reconcile(
        [fact("user.exercise", "User likes sailing", 60)], [hobby], dedupe_threshold=T, by_statement=False
    )
    assert write.action == "insert"


def test_a_value_is_weighed_against_its_own_slot_before_it_replaces_another_slots_memory() -> None:
    """ "lives in Oslo" must meet the Bergen memory (a conflict), not ride into the hobby memory by a merge."""
    hobby = mem("user.hobby", "User likes skiing", 0)
    city = mem("user.city", "User lives in Bergen", 90)
    [op] = reconcile([fact("user.city", "User likes skiing and lives in Oslo", 60)], [hobby, city], dedupe_threshold=T)
    assert op.target_id == city.id
    assert op.action in ("conflict", "supersede")


def test_a_statement_that_adds_to_one_of_a_memorys_statements_takes_its_place_there() -> None:
    old = mem("user.hobby", "User likes knitting; User bakes sourdough bread", 0)
    new = fact("user.preference", "User bakes sourdough bread every Sunday; User supports Hibernian", 60)
    merge, rest = reconcile([new], [old], dedupe_threshold=T)
    assert (merge.action, merge.target_id) == ("merge", old.id)
    assert merge.merged_value == "User likes knitting; User bakes sourdough bread every Sunday"
    assert merge.fact.value == "User bakes sourdough bread every Sunday"
    assert (rest.action, rest.fact.value) == ("insert", "User supports Hibernian")


def test_a_one_value_slots_memory_is_not_rewritten_by_a_statement_that_adds_to_it() -> None:
    """A city, an employer, a name hold one value: words added to it may name another one ("call me Sasha, only
    my mum says Alexander"), which `_same_key_decision` weighs; the statement is not merged into it."""
    old = mem("user.city", "User lives in Hyde Park, Leeds", 0)
    new = fact("user.hobby", "User lives in Hyde Park, Leeds and sails at weekends", 60)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert op.action == "insert"


def test_what_is_left_of_a_value_keeps_its_own_polarity() -> None:
    old = mem("user.drink", "User drinks green tea every morning", 0)
    new = fact("user.drink", "User drinks green tea every morning; User doesn't drink coffee any more", 60)
    refresh, rest = reconcile([new], [old], dedupe_threshold=T)
    assert (refresh.action, refresh.target_id) == ("refresh", old.id)
    assert rest.fact.value == "User doesn't drink coffee any more"
    assert rest.fact.negated


def test_a_habit_given_up_names_the_memory_by_its_verb_and_a_companion_lost_retires_it() -> None:
    """ "gave up on running" names "runs 5k every morning" (the verb's stem); "lost Biscuit" and "X is shelved"
    name what ended, under whatever key the old memory was written."""
    runs = mem("user.gym_routine", "User runs 5k every morning before work", 0)
    pool = fact("user.exercise", "User's knees gave up on running, it's the pool now", 60, supersedes_previous=True)
    [op] = reconcile([pool], [runs], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", runs.id)
    swims = mem("user.hobby", "User swims at the lido and loves a long brunch", -20)  # far from the change
    [op] = reconcile([pool], [swims], dedupe_threshold=T)
    assert op.action == "insert"  # a memory that names no running is not what was given up
    cat = mem("user.companion", "User has a cat named Biscuit", 0)
    lost = fact("user.pet", "User lost Biscuit in March", 60, supersedes_previous=True)
    [op] = reconcile([lost], [cat], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", cat.id)
    spanish = mem("user.learning", "User is learning Spanish", 0)
    shelved = fact("user.language", "Spanish is officially shelved, Japanese now", 60, supersedes_previous=True)
    [op] = reconcile([shelved], [spanish], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", spanish.id)

    # "日语那摊子早扔了": what was dropped stands before the verb, its measure word left out
    japanese = mem("user.learning", "用户在学日语，目标是考N2", 0)
    dropped = fact("user.language", "用户日语那摊子早扔了，现在每个周末上西班牙语班", 60, supersedes_previous=True)
    [op] = reconcile([dropped], [japanese], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", japanese.id)


def test_a_service_or_account_ended_names_what_it_ended_and_an_owner_in_the_third_person_is_no_term() -> None:
    """ "cancelled Dropbox", "closed my barclays account", "stopped using Notion" name what ended, under whatever
    key the old memory was written; a value says "the user's" where the user said "my", and that owner is no part
    of the term ("Closed the user's barclays account" names barclays, not "user")."""
    from pipeline.reconcile import _replaced_terms

    assert _replaced_terms("Closed the user's barclays account and moved everything to Starling") == ("barclays",)
    assert _replaced_terms("User gave up the user's old Honda") == ("Honda",)
    assert _replaced_terms("User stopped using Notion, Obsidian now") == ("Notion",)
    assert _replaced_terms("Cancelled Dropbox since User pays for Google One anyway") == ("Dropbox",)
    bank = mem("user.database", "User banks with Barclays", 0)  # filed under a slot the change is not
    closed = fact(
        "user.employer",
        "Closed the user's barclays account and moved everything to Starling",
        60,
        supersedes_previous=True,
    )
    [op] = reconcile([closed], [bank], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", bank.id)
    storage = mem("user.stack", "User uses Dropbox", 0)
    cancelled = fact("user.city", "Cancelled Dropbox, everything lives in Drive now", 60, supersedes_previous=True)
    [op] = reconcile([cancelled], [storage], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", storage.id)
    # without a change read, a service named is no change of it ("cancelled my dinner reservation" leaves it be)
    [op] = reconcile(
        [fact("user.city", "Cancelled Dropbox, everything lives in Drive now", 60)], [storage], dedupe_threshold=T
    )
    assert op.action != "supersede"


def test_a_change_from_something_else_inside_what_a_one_value_memory_says_refines_it() -> None:
    """ "从零售部门转岗到京东物流" beside "在京东工作": the change names what it moved from, which is not the memory's
    value, and lands inside it (京东): the user still works at 京东, so the change refines the memory. A change from
    the memory's own value, or one that shares nothing with it, still retires it."""
    jd = mem("user.employer", "用户在京东工作", 0)
    inside = fact("user.employer", "用户从零售部门内部转岗到京东物流了", 30, supersedes_previous=True)
    [op] = reconcile([inside], [jd], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("merge", jd.id)
    london = mem("user.city", "User lives in London", 0)
    [op] = reconcile(
        [fact("user.city", "User moved from Shoreditch to Camden, still in London", 30, supersedes_previous=True)],
        [london],
        dedupe_threshold=T,
    )
    assert (op.action, op.target_id) == ("merge", london.id)
    left = fact("user.employer", "用户从京东跳槽到了字节", 30, supersedes_previous=True)
    [op] = reconcile([left], [jd], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", jd.id)
    moved = fact("user.city", "User moved from Hamburg to Munich", 30, supersedes_previous=True)
    [op] = reconcile([moved], [london], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", london.id)


def test_a_change_meets_a_memory_of_a_slot_its_own_is_confused_with_at_a_lower_cosine() -> None:
    """ "switched everything over to a MacBook Air" (device) beside "uses a Windows 10 desktop PC" (os): the two slots
    are often confused (`Slot.confused_with`), so the memory is weighed as the change's neighbour at cosine 0.3, where
    a memory of an unrelated slot needs 0.45."""
    pc = mem("user.os", "User uses a Windows 10 desktop PC", 0)
    mac = fact("user.device", "User switched everything over to a MacBook Air", 69, supersedes_previous=True)  # 0.36
    [op] = reconcile([mac], [pc], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", pc.id)
    far = fact("user.device", "User switched everything over to a MacBook Air", 75, supersedes_previous=True)  # 0.26
    [op] = reconcile([far], [pc], dedupe_threshold=T)
    assert op.action == "insert"
    hobby = mem("user.hobby", "User plays the piano on Sundays", 0)  # not a slot device is confused with
    [op] = reconcile([mac], [hobby], dedupe_threshold=T)
    assert op.action == "insert"


def test_a_change_meets_another_slots_memory_only_if_it_was_held_before_this_transcript() -> None:
    """A change filed under employer that also reads as a city ("moved to Manchester for a job at the BBC") retires
    the city held before, but not the city the same conversation just said: that is two things said."""
    moved = fact(
        "user.employer",
        "User moved to Manchester for a job at the BBC",
        30,
        supersedes_previous=True,
        also_slots=["city"],
    )
    held = mem("user.city", "User lives in Leeds", 0)
    [op] = reconcile([moved], [held], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", held.id)
    said_now = fact("user.city", "User lives in Leeds", 0)
    first, second = reconcile([said_now, moved], [], dedupe_threshold=T)
    assert first.action == "insert"
    assert second.action == "insert"  # the Leeds memory of this transcript stays


def test_a_new_holder_of_a_one_at_a_time_relation_retires_the_old_ones_statement_only() -> None:
    """ "my new manager Sam" retires "User's manager is Ravi" (a writer's `user.manager`) and our own
    `boss:ravi.name`; a new friend retires nobody, and what else is known about Ravi stays."""
    writer = mem("user.manager", "User's manager is Ravi", 0)
    new = fact("manager:sam.identity", "The user's new manager Sam wants a weekly report", 80, supersedes_previous=True)
    [op] = reconcile([new], [writer], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", writer.id)

    own = mem("boss:ravi.name", "The user's boss is Ravi", 0)
    about = mem("boss:ravi.hobby", "Ravi plays cricket on Sundays", 5)
    [op] = reconcile([new], [about, own], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", own.id)

    # Without the change ("my manager Sam"), or for a relation people have many of, nothing is retired.
    plain = fact("manager:sam.identity", "The user's manager Sam wants a weekly report", 80)
    assert [o.action for o in reconcile([plain], [writer, own], dedupe_threshold=T)] == ["insert"]
    friend = fact("friend:sam.identity", "The user's new friend Sam climbs", 80, supersedes_previous=True)
    old_friend = mem("friend:ravi.identity", "The user's friend Ravi", 0)
    assert [o.action for o in reconcile([friend], [old_friend], dedupe_threshold=T)] == ["insert"]
    # The same person named again is no change of holder.
    again = fact("manager:ravi.identity", "The user's new manager Ravi likes slides", 80, supersedes_previous=True)
    assert [o.action for o in reconcile([again], [writer], dedupe_threshold=T)][0] != "supersede"


def test_a_break_up_retires_the_partner_it_names() -> None:
    partner = mem("partner:lena.family", "The user's girlfriend Lena", 0)
    hobby = mem("partner:lena.hobby", "Lena paints", 10)
    ended = fact("user.family", "Lena and the user broke up in May 2026", 60, supersedes_previous=True)
    [op] = reconcile([ended], [partner, hobby], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", partner.id)
    zh = mem("user.partner", "用户的女朋友是小雨", 0)
    [op] = reconcile([fact("user.family", "用户和小雨分手了", 60, supersedes_previous=True)], [zh], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", zh.id)


def test_a_marital_status_ends_the_one_it_follows_whichever_slot_either_is_under() -> None:
    """Being single, dating, engaged, married and divorced follow one another: a wife named in passing ends "single",
    a honeymoon ends "engaged", with no change cue and under any key."""
    single = mem("user.relationship", "用户现在单身", 0)
    [op] = reconcile([fact("user.family", "用户和用户的老公周末去爬山", 70)], [single], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", single.id)
    engaged = mem("user.marital_status", "User is engaged to Omar", 0)
    honeymoon = fact("user.travel", "Omar and User just got back from the honeymoon in Crete", 70)
    [op] = reconcile([honeymoon], [engaged], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", engaged.id)
    # someone else's spouse, a wedding ahead, a denial and a status that does not follow leave it
    for said in (
        "User's brother's wife is a dentist",
        "User is getting married in June",
        "User is not married",
        "User's ex-husband lives in Cork",
        "User was married before, in their twenties",
        "User is planning the honeymoon in Crete",
    ):
        [op] = reconcile([fact("user.family", said, 70)], [engaged], dedupe_threshold=T)
        assert op.action == "insert", said
    proposed = fact("user.family", "User got engaged on a beach in Crete", 70)
    [op] = reconcile([proposed], [single], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", single.id)
    # taking part is not being engaged
    single_en = mem("user.family", "User is single", 0)
    [op] = reconcile([fact("user.hobby", "User is engaged in a lot of community work", 70)], [single_en],
                     dedupe_threshold=T)  # fmt: skip
    assert op.action == "insert"
    # divorced and dating again are both true
    divorced = mem("user.family", "User is divorced", 0)
    [op] = reconcile([fact("user.family", "User's girlfriend Ana teaches yoga", 70)], [divorced], dedupe_threshold=T)
    assert op.action == "insert"


@pytest.mark.parametrize(
    ("held", "said", "ends"),
    [
        ("User is single", "User's boyfriend Ken is a chef", True),
        ("User is single", "User got married in Lisbon last spring", True),
        ("User's girlfriend is Mei", "User is single again", True),
        ("User's girlfriend is Mei", "User got engaged to Mei at the weekend", True),
        ("User is single", "User's fiancée Mei is a nurse", True),
        ("用户单身", "用户的未婚妻在杭州上班", True),
        ("User is single", "User has a husband", True),
        ("用户单身", "用户有老婆", True),
        ("User is single", "User has a daughter", False),  # a child says nothing of a partner
        ("User's girlfriend is Mei", "User's fiancée Mei is a nurse", True),
        ("User is engaged to Mei", "User's wife Mei teaches maths", True),
        ("User is married to Ken", "User is divorced", True),
        ("User is divorced", "User married Ken in June", True),
        ("User is divorced", "User is single", False),  # both true at once
        ("User is married to Ken", "User's boyfriend in college was Ken", False),  # two statuses said: read as none
    ],
)  # fmt: skip
def test_each_marital_status_ends_the_ones_it_follows(held: str, said: str, ends: bool) -> None:
    old = mem("user.family", held, 0)
    [op] = reconcile([fact("user.family", said, 70)], [old], dedupe_threshold=T)
    assert (op.action == "supersede" and op.target_id == old.id) is ends, op


def test_eating_meat_again_ends_a_meatless_diet_whichever_slot_says_it() -> None:
    vegan = mem("user.diet", "用户吃全素", 0)
    [op] = reconcile([fact("user.health", "用户体检贫血，医生让用户重新吃肉", 70)], [vegan], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", vegan.id)
    vegetarian = mem("user.diet", "User is vegetarian", 0)
    [op] = reconcile([fact("user.cooking", "User started eating fish on a trip to Lisbon", 70)], [vegetarian],
                     dedupe_threshold=T)  # fmt: skip
    assert (op.action, op.target_id) == ("supersede", vegetarian.id)
    # someone else's diet, or both said at once, ends nothing
    meat = mem("user.diet", "User eats meat", 0)
    for said in (
        "User's son is vegan",
        "User is fine with meat but User's partner is vegetarian",
        "User has a daughter who is vegetarian",
    ):
        [op] = reconcile([fact("user.family", said, 70)], [meat], dedupe_threshold=T)
        assert op.action == "insert", said
    married = mem("user.family", "User is married", 0)
    [op] = reconcile([fact("user.family", "User's sister is single", 70)], [married], dedupe_threshold=T)
    assert op.action == "insert"


def test_a_chinese_thing_sold_or_given_away_names_the_memory_of_it_even_by_one_character() -> None:
    """ "车卖了" (the date resolved between the object and the verb) names "每天开车上班"; the owner and the date before
    the object are no part of what is named."""
    drives = mem("user.commute", "用户每天开车上班", 0)
    sold = fact("user.possession", "用户车2026年3月卖了", 60, supersedes_previous=True)
    [op] = reconcile([sold], [drives], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", drives.id)
    cat = mem("user.pet", "用户养了一只猫，叫团子", 0)
    gone = fact("user.decision", "用户去年把猫送人了", 60, supersedes_previous=True)
    [op] = reconcile([gone], [cat], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", cat.id)
    books = mem("user.media", "用户喜欢看科幻小说", 0)
    assert [o.action for o in reconcile([fact("user.possession", "用户把旧书卖了", 80, supersedes_previous=True)],
                                        [books], dedupe_threshold=T)] == ["insert"]  # fmt: skip


def test_a_chinese_companion_gone_names_the_memory_of_it_under_any_key_and_a_pronoun_names_nothing() -> None:
    """ "球球年初走了" names the pet memory that holds 球球 (as "Biscuit passed away" does), with the date resolved
    between the name and the verb (年初 → "2026年初", last week → "2026年11月23日那周"); "他们都走了" names no one."""
    from pipeline.reconcile import _replaced_terms

    rabbit = mem("user.pet", "用户养了一只垂耳兔，叫球球", 0)
    for said in ("球球2026年初走了以后用户难过了很久", "用户家球球2026年11月23日那周去世了", "球球已经走了"):
        gone = fact("user.mood", said, 80, supersedes_previous=True)  # far in meaning: only the name meets it
        [op] = reconcile([gone], [rabbit], dedupe_threshold=T)
        assert (op.action, op.target_id) == ("supersede", rabbit.id), said
    assert _replaced_terms("用户的外婆2025年过世了") == ("外婆",)
    for nobody in ("他们都走了", "她们也走了", "我们走了"):
        assert _replaced_terms(nobody) == (), nobody


def test_chinese_objects_before_the_verb_that_ends_them_and_a_source_marker_only_as_one() -> None:
    """ "羽毛球不打了" (with 用户 after the object, as a value says it) names 羽毛球; "日语…已经放下了" names 日语.
    由 marks a source only before a verb of change: "自由泳" names no source, so a change that names none retires a
    slot's only value."""
    from pipeline.reconcile import _NAMES_ITS_SOURCE, _replaced_terms

    assert _replaced_terms("羽毛球用户不打了") == ("羽毛球",)
    assert _replaced_terms("日语用户其实已经放下了") == ("日语",)
    assert _replaced_terms("咖啡用户现在不喝了") == ("咖啡",)
    # an adverb or a demonstrative before the verb names nothing ("用户现在不用了" is no change of 现在)
    assert _replaced_terms("用户现在不用了") == ()
    assert _replaced_terms("用户那个已经卖了") == ()
    assert _NAMES_ITS_SOURCE.search("由 MySQL 改成 PostgreSQL")
    assert not _NAMES_ITS_SOURCE.search("用户自由泳换气老呛水")
    # 从 in 自从 (since), 从小, 从来, 从此 names nothing it changed from; "从 MySQL 换成" does
    for since in ("用户自从搬家改坐地铁上班", "用户从小就爱吃辣", "用户从来不喝酒", "用户从此改用 Linux"):
        assert not _NAMES_ITS_SOURCE.search(since), since
    assert _NAMES_ITS_SOURCE.search("用户从 MySQL 换成了 PostgreSQL")
    commute = mem("user.commute", "用户每天骑共享单车上班", 0)  # a writer's key, a routine of the registry's habit
    change = fact("user.habit", "用户自从搬家改坐地铁上班了", 60, supersedes_previous=True)
    [op] = reconcile([change], [commute], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", commute.id)
    old = mem("user.sport", "用户每周六打网球", 0)
    new = fact("user.exercise", "用户现在改游泳了，自由泳还不熟", 60, supersedes_previous=True)
    [op] = reconcile([new], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id)


def test_a_one_value_slot_s_new_value_from_now_on_replaces_the_old_one() -> None:
    """Free-worded one-value slots (how to answer) used to merge any new value as a refinement; one said to hold
    from now on replaces the old value, in both languages, unless it only adds to it."""
    old = mem("user.answer_style", "User wants thorough answers with background", 0)
    [op] = reconcile(
        [fact("user.answer_style", "User: from now on just the steps, numbered, no background", 40)],
        [old],
        dedupe_threshold=T,
    )
    assert op.action == "supersede"
    assert op.target_id == old.id

    old = mem("user.answer_style", "用户希望回答用英文", 0)
    [op] = reconcile([fact("user.answer_style", "从今天起用户希望用中文回答", 40)], [old], dedupe_threshold=T)
    assert op.action == "supersede"
    assert op.target_id == old.id

    # Said without "from now on", a different way of answering is a refinement as before; an addition stays one.
    old = mem("user.answer_style", "User wants thorough answers with background", 0)
    [op] = reconcile([fact("user.answer_style", "User: numbered steps please", 40)], [old], dedupe_threshold=T)
    assert op.action == "merge"
    [op] = reconcile(
        [fact("user.answer_style", "User: from now on also cite a source for each step", 40)], [old], dedupe_threshold=T
    )
    assert op.action == "merge"

    # "too" as a degree is no addition.
    [op] = reconcile(
        [fact("user.answer_style", "User: from now on skip the background, it makes answers too long", 40)],
        [old],
        dedupe_threshold=T,
    )
    assert op.action == "supersede"

    # On a slot that holds several values, from now on adds one: the old value stays.
    old = mem("user.instruction", "User wants metric units in every answer", 0)
    [op] = reconcile(
        [fact("user.instruction", "User: from now on CC my manager on every email draft", 40)],
        [old],
        dedupe_threshold=T,
    )
    assert op.action != "supersede"


def test_a_job_that_ended_retires_the_employer_whatever_slot_the_ending_was_filed_under() -> None:
    """ "我辞职了" (a decision, with the employer's slot among those it fills) retires where the user worked; the
    same decision without that slot leaves it alone."""
    job = mem("user.employer", "用户在广州一家外企做财务", 0)
    quit_ = fact("user.decision", "用户辞职了", 70, supersedes_previous=True, also_slots=["employer"])
    [op] = reconcile([quit_], [job], dedupe_threshold=T)
    assert op.action == "supersede"
    assert op.target_id == job.id
    other = fact("user.decision", "用户决定不买车了", 70, supersedes_previous=True)
    [op] = reconcile([other], [job], dedupe_threshold=T)
    assert op.action == "insert"


def test_moving_out_of_a_tool_names_the_tool_it_replaces() -> None:
    notes = mem("user.hobby", "User has been using Notion for all the user's notes", 0)
    moved = fact("user.stack", "User moved everything out of Notion into Obsidian", 60, supersedes_previous=True)
    [op] = reconcile([moved], [notes], dedupe_threshold=T)
    assert op.action == "supersede"
    assert op.target_id == notes.id


def test_a_correction_of_the_users_own_retires_the_memory_it_flips() -> None:
    """ "turns out I'm not allergic after all" says the memory was never so: it is retired, not kept in conflict. The
    same flip without a correction cue only lowers the old memory."""
    old = mem("user.allergy", "User is allergic to penicillin", 0)
    corrected = fact("user.allergy", "Turns out User is not allergic to penicillin after all", 20, negated=True)
    [op] = reconcile([corrected], [old], dedupe_threshold=T)
    assert op.action == "supersede"
    plain = fact("user.allergy", "User is not allergic to penicillin", 20, negated=True, confidence=0.75)
    [op] = reconcile([plain], [old], dedupe_threshold=T)
    assert op.action == "conflict"
    zh_old = mem("user.allergy", "用户头孢过敏", 0)
    [op] = reconcile([fact("user.allergy", "用户其实不对头孢过敏", 20, negated=True)], [zh_old], dedupe_threshold=T)
    assert op.action == "supersede"


def test_an_extracted_job_ending_retires_the_extracted_job() -> None:
    """The README's claim end to end over the pure stages: what the extractor keeps of "我辞职了" (a decision)
    retires what it kept of "我在广州一家外企做财务" (the employer); "I quit my job" retires "I work at Shopify"."""
    from tests.pipeline.test_extract import _active, _facts_of

    for job_said, quit_said in (
        ("我在广州一家外企做财务", "我辞职了"),
        ("I work at Shopify", "I quit my job last week"),
    ):
        [job] = _active(_facts_of(job_said))
        [quit_] = _active(_facts_of(quit_said))
        old = mem(job.key, job.value, 0)
        [op] = reconcile([EmbeddedFact(fact=quit_, embedding=vec(70))], [old], dedupe_threshold=T)
        assert (op.action, op.target_id) == ("supersede", old.id), (job_said, quit_said, op.reason)


def test_a_record_said_to_be_wrong_is_replaced_by_what_follows() -> None:
    """ "you got it wrong, I live in York" after "User lives in Leeds" retires Leeds (it was a conflict). The clause
    that says the record is wrong says nothing of the user and is no part of the value; only the first fact after it
    is the correction ("…, I have a dog too" adds a pet)."""
    from tests.pipeline.test_extract import _active, _facts_of

    for old_said, new_said in (
        ("I live in Leeds", "you got it wrong, I live in York"),
        ("I have two daughters", "no, you've got that wrong. I have a son and a daughter"),
        ("我住在杭州", "你记错了，我住在苏州"),
    ):
        [held] = _active(_facts_of(old_said))
        new = _active(_facts_of(new_said))
        assert len(new) == 1, new
        assert "wrong" not in new[0].value, new[0]
        assert "记错" not in new[0].value, new[0]
        old = mem(held.key, held.value, 0)
        [op] = reconcile([EmbeddedFact(fact=new[0], embedding=vec(70))], [old], dedupe_threshold=T)
        assert (op.action, op.target_id) == ("supersede", old.id), (new_said, op.reason)
    city, pet = _active(_facts_of("you got it wrong, I live in York. I have a dog too"))
    assert city.supersedes_previous
    assert not pet.supersedes_previous


def test_an_animal_put_down_retires_the_pet() -> None:
    """ "we had to put biscuit down last month" is a change the classifier alone finds unlikely to state a fact (0.34):
    a change is kept at a lower bar, and it names the pet it ended. "had to put my foot down", "I put the kids to
    sleep" and "had to calm down" are no changes."""
    from pipeline.text import has_change_cue
    from tests.pipeline.test_extract import _active, _facts_of

    [held] = _active(_facts_of("I have a beagle named Biscuit"))
    [ended] = _active(_facts_of("we had to put biscuit down last month, he was 14"))
    assert ended.supersedes_previous
    old = mem(held.key, held.value, 0)
    [op] = reconcile([EmbeddedFact(fact=ended, embedding=vec(70))], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id), op.reason
    for said in ("had to put my foot down with my boss", "I put the kids to sleep at 8", "I had to calm down"):
        assert not has_change_cue(said), said
    assert has_change_cue("we had to have her put to sleep")


def test_a_change_under_a_key_no_memory_holds_retires_the_nearest_memory_when_near_enough() -> None:
    """ "been on firefox for months now" filed as a project beside "uses Chrome" filed as a browser: the nearest
    memory of the subject is weighed as the change's own slot, from cosine CHANGE_NEIGHBOUR_COSINE up."""
    from pipeline.reconcile import CHANGE_NEIGHBOUR_COSINE

    chrome = mem("user.browser", "User uses Google Chrome as their browser", 0)
    other = mem("colleague:sam.browser", "Sam uses Google Chrome", 0)
    near = math.degrees(math.acos(CHANGE_NEIGHBOUR_COSINE)) - 2
    firefox = fact("user.project", "User has been on Firefox for a few months", near, supersedes_previous=True)
    [op] = reconcile([firefox], [chrome, other], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", chrome.id)

    far = fact("user.project", "User has been on Firefox for a few months", near + 6, supersedes_previous=True)
    [op] = reconcile([far], [chrome, other], dedupe_threshold=T)
    assert op.action == "insert"

    no_change = fact("user.project", "User has been on Firefox for a few months", near, supersedes_previous=False)
    [op] = reconcile([no_change], [chrome, other], dedupe_threshold=T)
    assert op.action == "insert"

    [op] = reconcile([firefox], [mem("user.browser", "User uses Google Chrome as their browser", 0, pinned=True)],
                     dedupe_threshold=T)  # fmt: skip
    assert op.action == "insert"


def test_a_latin_name_ends_where_chinese_begins() -> None:
    """ "从Jira迁到Linear" names Jira (not "Jira迁"), and "用Jira管理任务" names it too: Chinese characters are word
    characters to a regex, so a Latin name beside them had no word boundary and named nothing."""
    jira = mem("user.stack", "用户的团队用Jira管理任务", 0)
    moved = fact("user.stack", "用户的团队从Jira迁到Linear了", 80, supersedes_previous=True)
    [op] = reconcile([moved], [jira], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", jira.id)
    other = mem("user.stack", "用户的团队用Jiraffe管理任务", 0)  # another name that begins the same
    [op] = reconcile([moved], [other], dedupe_threshold=T)
    assert op.action != "supersede"


def test_a_change_retires_no_neighbour_written_earlier_in_the_same_transcript() -> None:
    """ "I love hiking … these days it's mostly bouldering": what one conversation says under two slots is two things
    said; the nearest-memory rule weighs only memories held before the transcript."""
    from pipeline.reconcile import CHANGE_NEIGHBOUR_COSINE

    near = math.degrees(math.acos(CHANGE_NEIGHBOUR_COSINE)) - 2
    hiking = fact("user.hobby", "User loves hiking", 0)
    bouldering = fact("user.exercise", "These days User mostly goes bouldering", near, supersedes_previous=True)
    assert [op.action for op in reconcile([hiking, bouldering], [], dedupe_threshold=T)] == ["insert", "insert"]
    held = mem("user.hobby", "User loves hiking", 0)  # the same memory, held from an earlier transcript
    [op] = reconcile([bouldering], [held], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", held.id)


def test_a_change_that_repeats_the_old_value_is_weighed_as_a_change() -> None:
    """A correction or change that repeats the old value says what it was ("turns out my sister is allergic to kiwi,
    not me" after "allergic to kiwi"): containing the old words makes it no refinement of it. Without the change,
    the same words add detail to the memory."""
    for key, old_value, new_value in (
        ("user.allergy", "User is allergic to kiwi", "Turns out the user's sister is allergic to kiwi, not the user"),
        ("user.allergy", "用户对猕猴桃过敏", "对猕猴桃过敏的是用户的妹妹"),
    ):
        old = mem(key, old_value, 0)
        [op] = reconcile([fact(key, new_value, 40, supersedes_previous=True)], [old], dedupe_threshold=T)
        assert (op.action, op.target_id) == ("supersede", old.id), (new_value, op)
        [same] = reconcile([fact(key, new_value, 40)], [old], dedupe_threshold=T)
        assert same.action == "merge", (new_value, same)


def test_a_thing_sold_off_with_diao_retires_the_memory_that_names_it() -> None:
    """ "思域上个月卖掉了" ends the car as "卖了" does, whatever slot the sale and the old car were filed under; the
    resultative 掉 is Chinese morphology, not a word of its own."""
    from pipeline.text import has_change_cue

    old = mem("user.possession", "用户有一辆本田思域", 0)
    sold = fact("user.device", "用户的思域上个月卖掉了，现在骑电动车上班", 70, supersedes_previous=True)
    [op] = reconcile([sold], [old], dedupe_threshold=T)
    assert (op.action, op.target_id) == ("supersede", old.id), op.reason
    for said in ("旧电脑卖掉了", "那套健身卡退掉了", "抖音卸掉了"):
        assert has_change_cue(said), said


def test_one_more_pet_or_pastime_taken_in_never_retires_the_slots_only_value() -> None:
    """ "we adopted a kitten" read as a change still adds to the pets: the dog stays. A change that names no old
    value and adds nothing ("now I cycle instead") still retires the only value."""
    dog = mem("user.pet", "User has a dog named Max", 0)
    for said in ("User adopted a kitten", "用户又领养了一只小猫", "User took up a second instrument"):
        [op] = reconcile([fact("user.pet", said, 70, supersedes_previous=True)], [dog], dedupe_threshold=T)
        assert op.action != "supersede", (said, op.reason)
    runs = mem("user.exercise", "User runs every morning", 0)
    [op] = reconcile(
        [fact("user.exercise", "User cycles to stay fit now instead", 70, supersedes_previous=True)],
        [runs],
        dedupe_threshold=T,
    )
    assert (op.action, op.target_id) == ("supersede", runs.id), op.reason
