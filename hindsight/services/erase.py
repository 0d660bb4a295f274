"""Hard erase, which cannot be undone: memories (by id or by subject), one transcript, or a whole namespace.

Each erase runs in the caller's unit of work, one PostgreSQL transaction (rows, embeddings, provenance, source
turns, episodes, rounds, the text in the audit history); once it commits, the copies outside PostgreSQL are
scrubbed too (`Outside`, through `after_commit`): turns of working-memory sessions in Redis, and every log file
(`settings.log_file` and the process logs of `hindsight up` in `settings.process_log_dir`). What stays:
content-free tombstones and `erased` audit records, so the audit shows that an erase happened, by whom and when.

- memory / subject: the memories, every turn that is their provenance or repeats them, the episodes that
  quote them, and every round (pipeline/rounds.py) that shows such a turn or mentions what was erased. A
  subject erase (a person leaving) also searches the WHOLE namespace: every transcript turn, episode and
  session turn naming the subject (its name from the keys, `colleague:li_wei` → "li wei", or an erased
  value) is redacted, whether or not a memory came of it.
- transcript: the transcript, its episode and its rounds are deleted; memories whose only provenance it was are erased,
  the others keep their row and lose that provenance.
- namespace: every memory, transcript, episode, round and session of the namespace is deleted, its audit history
  keeps no detail, and log lines about it keep only ids and event names.

Not covered here (operator's job, see the README): old row versions stay in PostgreSQL's heap, indexes and
WAL until VACUUM and WAL recycling; backups and replicas keep what they hold.
"""

from __future__ import annotations

import fcntl
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from sqlalchemy import Engine

from hindsight.config import Settings
from hindsight.db.engine import Session, after_commit
from hindsight.db.models import EpisodeRow, MemoryRow, TranscriptRow
from hindsight.db.repositories import (
    AuditRepository,
    EpisodeRepository,
    MemoryRepository,
    ProvenanceRepository,
    RoundRepository,
    TombstoneRepository,
    TranscriptRepository,
    scrub_json,
)
from hindsight.errors import NotFound
from hindsight.queue import Publisher
from hindsight.services.memory_writer import lock_namespace
from hindsight.services.sessions import SessionStore, session_store
from hindsight.textsearch import episode_search_text
from pipeline.text import has_cjk
from schemas.memories import EraseResult

log = structlog.get_logger(__name__)

ERASED = "[erased]"
_LOG_SAFE_FIELDS = frozenset(
    {"event", "level", "timestamp", "memory_id", "other_memory_id", "namespace", "transcript_id", "actor"}
)
_ID_FIELDS = ("memory_id", "other_memory_id", "transcript_id")


# -- what lives outside PostgreSQL -------------------------------------------------------------------------


@dataclass(frozen=True)
class Outside:
    """The copies outside PostgreSQL that an erase scrubs after its commit."""

    log_files: Sequence[Path] = ()
    sessions: SessionStore | None = None


def log_files(settings: Settings) -> list[Path]:
    """Every log file the product writes: the JSON-lines `log_file` and the children's output of
    `hindsight up` (`process_log_dir/*.log`)."""
    files = [settings.log_file] if settings.log_file else []
    if settings.process_log_dir.is_dir():
        files += sorted(p for p in settings.process_log_dir.glob("*.log") if p.is_file())
    return list(dict.fromkeys(p.resolve() for p in files))


def outside_of(settings: Settings, *, publisher: Publisher, engine: Engine | None = None) -> Outside:
    """The log files and the session store of these settings (for the MCP server and the CLI)."""
    from hindsight.broker import resolve_redis_url

    store = session_store(settings, redis_url=resolve_redis_url(settings), publisher=publisher, engine=engine)
    return Outside(log_files(settings), store)


# -- erase by memory id or by subject ----------------------------------------------------------------------


def erase(
    session: Session,
    namespace: str,
    *,
    memory_ids: Sequence[uuid.UUID] = (),
    key_prefix: str | None = None,
    subject: str | None = None,
    actor: str,
    outside: Outside | None = None,
) -> EraseResult:
    """Remove memories for real, by id or by subject (key prefix / subject), leaving tombstones.

    Redacts the source turns and the episodes that quote them; a subject erase also redacts every turn,
    episode and session turn of the namespace that names the subject. Raises NotFound when a named id is
    not in the namespace. The copies outside PostgreSQL are scrubbed once the caller's unit of work
    commits, which is when the result's `log_lines_scrubbed` and `sessions_scrubbed` are filled in (0 before)."""
    erase_id = uuid.uuid4()
    scope = "memory" if memory_ids else "subject"
    lock_namespace(session, namespace)
    rows = _lock_memories(session, namespace, memory_ids, key_prefix, subject)
    private = [r.key for r in rows if _is_private_key(r.key)]
    texts = [r.value for r in rows] + private
    names = _name_terms([*private, key_prefix or "", subject or ""]) if scope == "subject" else []
    needles = _needles(texts)
    # In the cited transcripts any distinctive term of an erased value marks a turn (an assistant's
    # "Noted, Acme Labs it is." quotes the fact without being its provenance); elsewhere in the namespace
    # only the exact values and the subject's name do: "Oslo" alone does not name the person.
    near = _Mentions([*needles, *_spellings(names)], [*_distinctive_terms(texts), *names])
    wide = _Mentions(near.needles, names)

    cited = _cited_turns(session, rows)
    repo = TranscriptRepository(session)
    transcripts = repo.lock_many(namespace, list(cited))
    if names:
        transcripts += [t for t in repo.lock_mentioning(namespace, wide.lowered()) if t.id not in cited]
    redacted, turn_texts = _redact_turns(transcripts, cited, near, wide)
    needles = [*_needles([*needles, *turn_texts, *_sentences(turn_texts)]), *_spellings(names)]

    episodes = EpisodeRepository(session).for_transcripts(namespace, list(redacted))
    if names:
        seen = {e.id for e in episodes}
        episodes += [
            e for e in EpisodeRepository(session).lock_mentioning(namespace, wide.lowered()) if e.id not in seen
        ]
    episodes_redacted = _redact_episodes(episodes, redacted, turn_texts, _Mentions(needles, names))
    # A round shows its turns and is keyed by the facts taken from them: one that shows a redacted turn or
    # mentions the erased anywhere is deleted (rounds are derived data; the redacted turns remain).
    round_repo = RoundRepository(session)
    rounds_erased = round_repo.delete_covering(namespace, redacted)
    rounds_erased += round_repo.delete_mentioning(namespace, _Mentions(needles, names).lowered())
    audit_rows = _remove_memories(session, namespace, rows, needles, erase_id=erase_id, scope=scope, actor=actor)
    erased = [r.id for r in rows]
    result = EraseResult(
        erase_id=erase_id,
        namespace=namespace,
        scope=scope,
        memory_ids=erased,
        transcripts_redacted=len(redacted),
        turns_redacted=sum(len(t) for t in redacted.values()),
        episodes_redacted=episodes_redacted,
        rounds_erased=rounds_erased,
        audit_rows_scrubbed=audit_rows,
        log_lines_scrubbed=0,
    )

    def logged() -> None:
        for mid in erased:
            log.info("memory.erased", memory_id=str(mid), namespace=namespace, actor=actor, erase_id=str(erase_id))

    return _scrub_after_commit(session, result, outside, ids=erased, needles=needles, terms=names, logged=logged)


# -- erase one transcript ----------------------------------------------------------------------------------


def erase_transcript(
    session: Session,
    namespace: str,
    transcript_id: uuid.UUID,
    *,
    actor: str,
    outside: Outside | None = None,
) -> EraseResult:
    """Delete one transcript and its episode. Memories whose only provenance it was are erased (tombstones);
    the others keep their row and lose this provenance. Raises NotFound when it is not in the namespace.
    Outside PostgreSQL is scrubbed after the commit, as for `erase`."""
    erase_id = uuid.uuid4()
    repo = TranscriptRepository(session)
    # The transcript before the namespace: the order a worker takes them in, so the two never deadlock.
    found = repo.lock_many(namespace, [transcript_id])
    if not found:
        raise NotFound(f"transcript {transcript_id} not found")
    lock_namespace(session, namespace)
    transcript = found[0]
    provenance = ProvenanceRepository(session)
    cited = {p.memory_id for p in provenance.for_transcript(transcript.id)}
    elsewhere = {p.memory_id for p in provenance.for_memories(list(cited)) if p.transcript_id != transcript.id}
    rows = MemoryRepository(session).lock_many(namespace, sorted(cited - elsewhere))
    turn_texts = [str(t.get("content", "")) for t in transcript.turns]
    texts = [r.value for r in rows] + [r.key for r in rows if _is_private_key(r.key)]
    needles = _needles([*texts, *turn_texts, *_sentences(turn_texts)])
    episodes = EpisodeRepository(session).count_for_transcripts(namespace, [transcript.id])
    rounds = RoundRepository(session).count_for_transcripts(namespace, [transcript.id])  # cascade with it
    provenance.delete_for_transcript(transcript.id)
    audit_rows = _remove_memories(session, namespace, rows, needles, erase_id=erase_id, scope="transcript", actor=actor)
    repo.delete_many(namespace, [transcript.id])
    erased = [r.id for r in rows]
    result = EraseResult(
        erase_id=erase_id,
        namespace=namespace,
        scope="transcript",
        memory_ids=erased,
        transcripts_redacted=0,
        turns_redacted=len(turn_texts),
        episodes_redacted=0,
        transcripts_erased=1,
        episodes_erased=episodes,
        rounds_erased=rounds,
        audit_rows_scrubbed=audit_rows,
        log_lines_scrubbed=0,
    )

    def logged() -> None:
        log.info(
            "transcript.erased",
            transcript_id=str(transcript_id),
            namespace=namespace,
            actor=actor,
            erase_id=str(erase_id),
        )

    return _scrub_after_commit(
        session, result, outside, ids=[*erased, transcript_id], needles=needles, terms=[], logged=logged
    )


# -- erase a whole namespace -------------------------------------------------------------------------------


def erase_namespace(
    session: Session,
    namespace: str,
    *,
    actor: str,
    outside: Outside | None = None,
) -> EraseResult:
    """Delete everything of the namespace (an end user leaving): memories, transcripts, episodes, provenance,
    conflicts, the detail of its audit history, its sessions and its log lines. Tombstones and `erased`
    audit records stay. A transcript accepted while this runs is not covered: erase again after it.
    Outside PostgreSQL is scrubbed after the commit, as for `erase`."""
    erase_id = uuid.uuid4()
    transcripts = TranscriptRepository(session)
    tids = transcripts.lock_namespace_rows(namespace)  # before the namespace lock, as a worker does
    lock_namespace(session, namespace)
    memories = MemoryRepository(session)
    rows = memories.lock_many(namespace, memories.ids_in_namespace(namespace))
    # Log lines naming no namespace (a plain-text line, a dead letter's reason) may still quote a value.
    needles = _needles([r.value for r in rows] + [r.key for r in rows if _is_private_key(r.key)])
    episodes = EpisodeRepository(session).count_for_transcripts(namespace, tids)
    rounds = RoundRepository(session).count_for_transcripts(namespace, tids)
    memories.delete_many(namespace, [r.id for r in rows])
    audit_rows = AuditRepository(session).scrub_namespace(namespace)
    _tombstones(session, namespace, rows, erase_id=erase_id, scope="namespace", actor=actor)
    transcripts.delete_many(namespace, tids)
    erased = [r.id for r in rows]
    result = EraseResult(
        erase_id=erase_id,
        namespace=namespace,
        scope="namespace",
        memory_ids=erased,
        transcripts_redacted=0,
        turns_redacted=0,
        episodes_redacted=0,
        transcripts_erased=len(tids),
        episodes_erased=episodes,
        rounds_erased=rounds,
        audit_rows_scrubbed=audit_rows,
        log_lines_scrubbed=0,
    )

    def logged() -> None:
        log.info("namespace.erased", namespace=namespace, actor=actor, erase_id=str(erase_id), memories=len(erased))

    return _scrub_after_commit(
        session, result, outside, ids=[*erased, *tids], needles=needles, terms=[], logged=logged, whole_namespace=True
    )


# -- steps -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Mentions:
    """Does a text mention the erased: an exact needle, or a lower-case term anywhere in it."""

    needles: Sequence[str]
    terms: Sequence[str]

    def __call__(self, text: str) -> bool:
        if any(n in text for n in self.needles):
            return True
        lowered = text.lower()
        return any(t in lowered for t in self.terms)

    def lowered(self) -> list[str]:
        return list(dict.fromkeys([*(n.lower() for n in self.needles), *self.terms]))


def _lock_memories(
    session: Session,
    namespace: str,
    memory_ids: Sequence[uuid.UUID],
    key_prefix: str | None,
    subject: str | None,
) -> list[MemoryRow]:
    memories = MemoryRepository(session)
    ids = list(dict.fromkeys(memory_ids))
    if key_prefix or subject:
        ids += [i for i in memories.ids_for_subject(namespace, key_prefix=key_prefix, subject=subject) if i not in ids]
    rows = memories.lock_many(namespace, ids)
    missing = set(memory_ids) - {r.id for r in rows}
    if missing:
        raise NotFound(f"memory {sorted(missing)[0]} not found")
    return rows


def _cited_turns(session: Session, rows: Sequence[MemoryRow]) -> dict[uuid.UUID, set[str]]:
    cited: dict[uuid.UUID, set[str]] = {}
    for p in ProvenanceRepository(session).for_memories([r.id for r in rows]):
        if p.transcript_id is not None:
            cited.setdefault(p.transcript_id, set()).update(p.turn_ids)
    return cited


def _redact_turns(
    transcripts: Sequence[TranscriptRow],
    cited: dict[uuid.UUID, set[str]],
    near: Callable[[str], bool],
    wide: Callable[[str], bool],
) -> tuple[dict[uuid.UUID, set[str]], list[str]]:
    """Redact the cited turns and the turns that mention the erased (`near` in cited transcripts, `wide`
    elsewhere). Returns the redacted turn ids per transcript and the texts they had."""
    redacted: dict[uuid.UUID, set[str]] = {}
    texts: list[str] = []
    for tr in transcripts:
        mentions = near if tr.id in cited else wide
        new_turns, changed = [], set()
        for t in tr.turns:
            content = str(t.get("content", ""))
            if content != ERASED and (t.get("turn_id") in cited.get(tr.id, set()) or mentions(content)):
                texts.append(content)
                changed.add(str(t.get("turn_id")))
                t = {**t, "content": ERASED}
            new_turns.append(t)
        if changed:
            tr.turns = new_turns
            redacted[tr.id] = changed
    return redacted, texts


def _redact_episodes(
    episodes: Sequence[EpisodeRow],
    redacted: dict[uuid.UUID, set[str]],
    turn_texts: Sequence[str],
    mentions: Callable[[str], bool],
) -> int:
    """Episodes that quote a redacted turn or mention the erased lose summary, entities, embedding and
    search text; the other episodes of redacted transcripts lose the entities that came from those turns."""
    count = 0
    for ep in episodes:
        text = "\n".join([ep.summary, *ep.entities, ep.search_text])
        if bool(set(ep.turn_ids) & redacted.get(ep.transcript_id, set())) or mentions(text):
            if ep.summary != ERASED or ep.embedding is not None:
                count += 1
            ep.summary, ep.entities, ep.embedding, ep.search_text = ERASED, [], None, ""
        else:
            ep.entities = [e for e in ep.entities if not any(e in txt for txt in turn_texts)]
            ep.search_text = episode_search_text(ep.summary, ep.entities)
    return count


def _remove_memories(
    session: Session,
    namespace: str,
    rows: Sequence[MemoryRow],
    needles: Sequence[str],
    *,
    erase_id: uuid.UUID,
    scope: str,
    actor: str,
) -> int:
    """Delete the rows (provenance and conflicts cascade), cut their text out of the namespace's audit
    history, and leave tombstones. Returns how many audit rows were scrubbed."""
    ids = [r.id for r in rows]
    MemoryRepository(session).delete_many(namespace, ids)
    audit_rows = AuditRepository(session).scrub(namespace, ids, needles)
    _tombstones(session, namespace, rows, erase_id=erase_id, scope=scope, actor=actor)
    return audit_rows


def _tombstones(
    session: Session, namespace: str, rows: Sequence[MemoryRow], *, erase_id: uuid.UUID, scope: str, actor: str
) -> None:
    tombs, audit = TombstoneRepository(session), AuditRepository(session)
    for r in rows:
        tombs.add(memory_id=r.id, namespace=namespace, erase_id=erase_id, scope=scope, actor=actor)
        audit.add(
            memory_id=r.id,
            namespace=namespace,
            action="erased",
            actor=actor,
            from_state=r.state,
            to_state=None,
            detail={"erase_id": str(erase_id), "scope": scope},
        )


def _scrub_after_commit(
    session: Session,
    result: EraseResult,
    outside: Outside | None,
    *,
    ids: Sequence[uuid.UUID],
    needles: Sequence[str],
    terms: Sequence[str],
    logged: Callable[[], None],
    whole_namespace: bool = False,
) -> EraseResult:
    """Once the erase commits: scrub outside PostgreSQL (`_scrub_outside`), count what was scrubbed into
    `result`, then log the erase (`logged`). Nothing outside is touched if the unit of work rolls back."""

    def scrub() -> None:
        result.log_lines_scrubbed, result.sessions_scrubbed = _scrub_outside(
            outside, result.namespace, ids=ids, needles=needles, terms=terms, whole_namespace=whole_namespace
        )
        logged()

    after_commit(session, scrub)
    return result


def _scrub_outside(
    outside: Outside | None,
    namespace: str,
    *,
    ids: Sequence[uuid.UUID],
    needles: Sequence[str],
    terms: Sequence[str],
    whole_namespace: bool = False,
) -> tuple[int, int]:
    """After the commit: the log files, then the namespace's working-memory sessions. Returns (log lines
    changed, session turns redacted or sessions dropped)."""
    outside = outside or Outside()
    ns = namespace if whole_namespace else None
    lines = sum(scrub_log_file(path, ids, needles, namespace=ns) for path in outside.log_files)
    if outside.sessions is None:
        return lines, 0
    if whole_namespace:
        return lines, outside.sessions.erase_namespace(namespace)
    return lines, outside.sessions.erase_matching(namespace, [*needles, *terms], ERASED)


# -- what counts as the erased text ------------------------------------------------------------------------


_GENERIC_KEY = re.compile(r"^[a-z_]+(\.[a-z_]+)*$")
_NAMED_KEY = re.compile(r"^[^:.]+:([^.]+)")


def _is_private_key(key: str) -> bool:
    """Keys like `user.database` say nothing private; keys naming a person (`colleague:li.city`) do."""
    return not _GENERIC_KEY.match(key)


def _name_terms(keys: Sequence[str]) -> list[str]:
    """The subject's name as its keys spell it (`colleague:li_wei.city` → "li wei", `colleague:qzx` → "qzx"
    when long enough to name nobody else: 4+ letters, or 2+ CJK characters), lower-case."""
    out: set[str] = set()
    for key in keys:
        m = _NAMED_KEY.match(key)
        if not m:
            continue
        name = re.sub(r"[_\-]+", " ", m.group(1)).strip()
        for term in (name, *name.split()):
            if len(term) >= 4 or (has_cjk(term) and len(term) >= 2):
                out.add(term.lower())
    return sorted(out)


def _spellings(terms: Sequence[str]) -> list[str]:
    """Case spellings of lower-case terms, for exact-match scrubbing (audit detail, log lines)."""
    return list(dict.fromkeys(s for t in terms for s in (t, t.title(), t.capitalize(), t.upper())))


def _distinctive_terms(texts: Sequence[str]) -> list[str]:
    """Names, identifiers and versions in the erased text (lower-cased), at least 4 characters long."""
    from pipeline.reconcile import _salient

    out: set[str] = set()
    for t in texts:
        out |= {w for w in _salient(t.replace(".", " ").replace("_", " ")) if len(w) >= 4}
    return sorted(out)


def _needles(texts: Sequence[str]) -> list[str]:
    out: list[str] = []
    for t in texts:
        t = t.strip()
        if len(t) >= 4 and t != ERASED and t not in out:
            out.append(t)
    return sorted(out, key=len, reverse=True)


def _sentences(texts: Sequence[str]) -> list[str]:
    """Sentences and clauses of the redacted turns: summaries and audit records quote them piecemeal."""
    from pipeline.text import split_sentences

    out: list[str] = []
    for t in texts:
        for s in split_sentences(t):
            out.append(s)
            out.extend(p for p in re.split(r"[,，;；:：]", s) if len(p.strip()) >= 8)
    return out


# -- log files ---------------------------------------------------------------------------------------------


def scrub_log_file(
    path: Path, ids: Sequence[uuid.UUID], needles: Sequence[str], *, namespace: str | None = None
) -> int:
    """Rewrite a log file in place: JSON lines about an erased memory or transcript (`ids`), or about the
    erased `namespace`, keep only ids and event names; the erased text is cut out of every other line. In
    place (not a rename) so processes appending to the file keep writing to it."""
    if not path.exists():
        return 0
    wanted = {str(i) for i in ids}
    changed = 0
    with path.open("r+", encoding="utf-8", errors="surrogateescape") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            lines = fh.read().splitlines()
            out: list[str] = []
            for line in lines:
                new = _scrub_line(line, wanted, needles, namespace)
                changed += new != line
                out.append(new)
            if changed:
                fh.seek(0)
                fh.write("\n".join(out) + ("\n" if out else ""))
                fh.truncate()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    return changed


def _scrub_line(line: str, ids: set[str], needles: Sequence[str], namespace: str | None) -> str:
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        for n in needles:
            line = line.replace(n, ERASED)
        if namespace and f"/namespaces/{namespace}/" in line:
            # An access log line of the erased namespace: its query string (a search) may name anyone.
            line = re.sub(rf"(/namespaces/{re.escape(namespace)}/\S*?)\?[^\s\"']*", rf"\1?{ERASED}", line)
        return line
    if any(str(event.get(f)) in ids for f in _ID_FIELDS) or (namespace and event.get("namespace") == namespace):
        event = {k: v for k, v in event.items() if k in _LOG_SAFE_FIELDS}
        event["erased"] = True
    new = json.dumps(scrub_json(event, needles, ERASED), ensure_ascii=False)
    return line if json.loads(line) == json.loads(new) else new


__all__ = [
    "ERASED",
    "Outside",
    "erase",
    "erase_namespace",
    "erase_transcript",
    "log_files",
    "outside_of",
    "scrub_log_file",
]
