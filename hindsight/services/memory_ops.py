"""Privileged writes, the only write paths outside the queue: write, remember, forget/unforget, verify, erase.

- `write_memory` embeds a structured fact and sends it through the same reconcile stage and the same writer
  as distilled facts (`hindsight.services.store`), never a raw insert.
- `remember` runs free text through the offline extractor (the same rules distillation uses); when those
  find no stable fact, the text (secrets redacted) is kept as one manual `note.*` fact. `metadata.key`
  skips extraction and writes the text under that key.
- `forget` is soft: the memory moves to the `forgotten` state (out of recall, lists and reconcile), keeps
  its row and history, and `unforget` restores the state it had.
- `verify` raises confidence, resets `last_verified_at` and revives a stale or archived memory.
- `erase` removes memories for real (rows, embeddings, provenance, the source turns, episodes that quote
  them, their text in the audit history and in the JSON-lines log file) and leaves content-free tombstones.
Every operation is audited and logged with the memory id.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import Engine

from hindsight.config import Settings
from hindsight.db.engine import session_scope
from hindsight.db.models import MemoryRow
from hindsight.db.repositories import (
    AuditRepository,
    EpisodeRepository,
    MemoryRepository,
    ProvenanceRepository,
    TombstoneRepository,
    TranscriptRepository,
    scrub_json,
)
from hindsight.errors import InvalidInput, NotFound
from hindsight.services.store import MemoryWriter, lock_namespace, reconcile_in_namespace
from hindsight.textsearch import episode_search_text
from pipeline.base import Embedder
from pipeline.reconcile import SOURCE_CONFIDENCE_CAP
from pipeline.text import core_negated
from schemas.memories import (
    EraseResult,
    MemoryRead,
    MemoryWrite,
    RememberResult,
    WriteResult,
)
from schemas.pipeline import CandidateFact, EmbeddedFact, MemoryState, Source, Transcript, Turn

log = structlog.get_logger(__name__)

FORGOTTEN = "forgotten"
ERASED = "[erased]"
VERIFY_STEP = 0.1
WRITE_BACKEND = "manual"
_STEERING = ("kind", "key", "pinned", "ttl_days", "confidence", "source", "subject")
_LOG_SAFE_FIELDS = frozenset(
    {"event", "level", "timestamp", "memory_id", "other_memory_id", "namespace", "transcript_id", "actor"}
)


class StateConflict(InvalidInput):
    """The memory's state does not allow the operation (HTTP 409)."""


def _now(now: datetime | None) -> datetime:
    return now or datetime.now(UTC)


# -- writes --------------------------------------------------------------------------------------------------


def write_memory(
    session: Any,
    namespace: str,
    write: MemoryWrite,
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    metadata: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> WriteResult:
    """Store one structured fact through reconcile (dedupe, merge, conflict) and the shared writer."""
    return _write_facts(
        session,
        namespace,
        [(write, _fact(write))],
        embedder=embedder,
        settings=settings,
        actor=actor,
        metadata=metadata,
        now=now,
    )[0]


def remember(
    session: Any,
    namespace: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    now: datetime | None = None,
) -> RememberResult:
    """Remember free text: extracted stable facts, or the text itself as one note."""
    from pipeline.extract import extract_facts
    from pipeline.secrets import redact_secrets

    metadata = dict(metadata or {})
    steering = {k: metadata.pop(k) for k in _STEERING if k in metadata}
    text = redact_secrets(content.strip()).text
    base = {k: v for k, v in steering.items() if k in ("kind", "pinned", "ttl_days", "source", "subject")}
    writes: list[MemoryWrite] = []
    extracted = False
    try:
        if "key" not in steering:
            transcript = Transcript(
                id=uuid.uuid4(),
                namespace=namespace,
                conversation_id="remember",
                occurred_at=_now(now),
                turns=[Turn(index=0, turn_id="remember", role="user", content=text)],
            )
            for fact in extract_facts(transcript):
                if fact.state is not MemoryState.active:
                    continue
                writes.append(
                    MemoryWrite(
                        key=fact.key,
                        value=fact.value,
                        kind=steering.get("kind", fact.kind),
                        confidence=steering.get("confidence", 0.9),
                        **{k: v for k, v in base.items() if k != "kind"},
                    )
                )
            extracted = bool(writes)
        if not writes:
            key = steering.get("key") or "note." + hashlib.sha256(text.encode()).hexdigest()[:12]
            writes.append(
                MemoryWrite(
                    key=key,
                    value=text[:2000],
                    confidence=steering.get("confidence", 0.9),
                    **base,
                )
            )
    except ValueError as exc:  # pydantic validation of the steering metadata
        raise InvalidInput(f"invalid metadata: {exc}") from None
    results = _write_facts(
        session,
        namespace,
        [(w, _fact(w)) for w in writes],
        embedder=embedder,
        settings=settings,
        actor=actor,
        metadata=metadata or None,
        now=now,
    )
    return RememberResult(extracted=extracted, results=results)


def _fact(write: MemoryWrite) -> CandidateFact:
    subject = write.subject or write.key.split(".", 1)[0] or "user"
    return CandidateFact(
        kind=write.kind,
        key=write.key,
        value=write.value,
        source=write.source,
        confidence=write.confidence,
        turn_ids=[],
        subject=subject[:128],
        negated=core_negated(write.value),
        state=MemoryState.quarantined if write.source is Source.tool else MemoryState.active,
    )


def _write_facts(
    session: Any,
    namespace: str,
    items: Sequence[tuple[MemoryWrite, CandidateFact]],
    *,
    embedder: Embedder,
    settings: Settings,
    actor: str,
    metadata: dict[str, Any] | None,
    now: datetime | None,
) -> list[WriteResult]:
    now = _now(now)
    vectors = embedder.embed([f.value for _, f in items])
    embedded = [EmbeddedFact(fact=f, embedding=v) for (_, f), v in zip(items, vectors, strict=True)]
    lock_namespace(session, namespace)
    ops, rows = reconcile_in_namespace(
        session, namespace, embedded, dedupe_threshold=settings.embedding.effective_dedupe_threshold
    )
    writer = MemoryWriter(
        session=session,
        namespace=namespace,
        transcript_id=None,
        occurred_at=now,
        actor=actor,
        backend=WRITE_BACKEND,
        embedding_model=embedder.name,
        now=now,
        rows=rows,
        audit_extra={"metadata": metadata} if metadata else {},
    )
    results: list[WriteResult] = []
    for (write, _), op in zip(items, ops, strict=True):
        row = writer.apply(op)
        if write.pinned and not row.pinned:
            row.pinned = True
        if write.ttl_days is not None:
            row.ttl_days = write.ttl_days
        session.flush()
        results.append(WriteResult(action=op.action, reason=op.reason, memory=MemoryRead.model_validate(row)))
    return results


# -- forget / unforget / verify ----------------------------------------------------------------------------


def _locked(session: Any, namespace: str, memory_id: uuid.UUID) -> MemoryRow:
    row = MemoryRepository(session).get(namespace, memory_id, for_update=True)
    if row is None:
        raise NotFound(f"memory {memory_id} not found")
    return row


def _audit(session: Any, row: MemoryRow, action: str, actor: str, before: str, detail: dict[str, Any]) -> None:
    AuditRepository(session).add(
        memory_id=row.id,
        namespace=row.namespace,
        action=action,
        actor=actor,
        from_state=before,
        to_state=row.state,
        detail=detail,
        at=row.updated_at,
    )
    log.info(f"memory.{action}", memory_id=str(row.id), namespace=row.namespace, actor=actor, to_state=row.state)


def forget(
    session: Any,
    namespace: str,
    memory_id: uuid.UUID,
    *,
    actor: str,
    reason: str | None = None,
    now: datetime | None = None,
) -> MemoryRead:
    """Soft forget: out of recall and lists, kept (with its history) for audit; undone by `unforget`."""
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state == FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is already forgotten")
    before = row.state
    row.state, row.state_changed_at, row.updated_at = FORGOTTEN, now, now
    _audit(session, row, "forgotten", actor, before, {"reason": reason} if reason else {})
    session.flush()
    return MemoryRead.model_validate(row)


def unforget(
    session: Any, namespace: str, memory_id: uuid.UUID, *, actor: str, now: datetime | None = None
) -> MemoryRead:
    """Undo a forget: the memory gets back the state it had."""
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state != FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is not forgotten")
    last = AuditRepository(session).last(row.id, "forgotten")
    restored = last.from_state if last is not None and last.from_state else "active"
    row.state, row.state_changed_at, row.updated_at = restored, now, now
    _audit(session, row, "unforgotten", actor, FORGOTTEN, {})
    session.flush()
    return MemoryRead.model_validate(row)


def verify(
    session: Any,
    namespace: str,
    memory_id: uuid.UUID,
    *,
    actor: str,
    confidence: float | None = None,
    now: datetime | None = None,
) -> MemoryRead:
    """Re-confirm a memory: confidence up (capped by its source), last_verified_at now, stale/archived → active."""
    now = _now(now)
    row = _locked(session, namespace, memory_id)
    if row.state == FORGOTTEN:
        raise StateConflict(f"memory {memory_id} is forgotten; unforget it first")
    if row.state == MemoryState.quarantined.value:
        raise StateConflict(
            f"memory {memory_id} is quarantined (untrusted source); write the fact with memory_write instead"
        )
    cap = SOURCE_CONFIDENCE_CAP.get(Source(row.source), 1.0)
    wanted = confidence if confidence is not None else row.confidence + VERIFY_STEP
    before_state, before_conf = row.state, row.confidence
    row.confidence = round(max(row.confidence, min(wanted, cap)), 4)
    row.last_verified_at, row.updated_at = now, now
    if row.state in ("stale", "archived"):
        row.state, row.state_changed_at = "active", now
    _audit(
        session,
        row,
        "verified",
        actor,
        before_state,
        {"confidence": row.confidence, "previous_confidence": before_conf},
    )
    session.flush()
    return MemoryRead.model_validate(row)


# -- erase -------------------------------------------------------------------------------------------------


def erase(
    engine: Engine,
    namespace: str,
    *,
    memory_ids: Sequence[uuid.UUID] = (),
    key_prefix: str | None = None,
    subject: str | None = None,
    actor: str,
    log_file: Path | None = None,
) -> EraseResult:
    """Remove memories for real, by id or by subject (key prefix / subject), leaving tombstones.

    One transaction removes the rows (embeddings, provenance and conflicts with them), redacts the source
    turns and the episodes that quote them, and cuts the text out of the audit history; after the commit,
    the JSON-lines log file is rewritten without it. Raises NotFound when a named id is not in the namespace.
    """
    erase_id = uuid.uuid4()
    scope = "memory" if memory_ids else "subject"
    with session_scope(engine) as session:
        lock_namespace(session, namespace)
        memories = MemoryRepository(session)
        ids = list(dict.fromkeys(memory_ids))
        if key_prefix or subject:
            ids += [
                i for i in memories.ids_for_subject(namespace, key_prefix=key_prefix, subject=subject) if i not in ids
            ]
        rows = memories.lock_many(namespace, ids)
        missing = set(memory_ids) - {r.id for r in rows}
        if missing:
            raise NotFound(f"memory {sorted(missing)[0]} not found")
        needles = _needles([r.value for r in rows] + [r.key for r in rows if _is_private_key(r.key)])

        # Source turns: every turn a provenance record cites, plus any turn of those transcripts that
        # repeats an erased value or mentions one of its distinctive terms (a name, an identifier): an
        # assistant's "Noted, Acme Labs it is." quotes the fact without being its provenance.
        terms = _distinctive_terms([r.value for r in rows] + [r.key for r in rows if _is_private_key(r.key)])
        cited: dict[uuid.UUID, set[str]] = {}
        for p in ProvenanceRepository(session).for_memories([r.id for r in rows]):
            if p.transcript_id is not None:
                cited.setdefault(p.transcript_id, set()).update(p.turn_ids)
        turn_texts: list[str] = []
        turns_redacted = transcripts_redacted = 0
        transcripts = TranscriptRepository(session).lock_many(namespace, list(cited))
        redacted_ids: dict[uuid.UUID, set[str]] = {}
        for tr in transcripts:
            new_turns, changed = [], set()
            for t in tr.turns:
                content = t.get("content", "")
                lowered = content.lower()
                if (
                    t.get("turn_id") in cited[tr.id]
                    or any(n in content for n in needles)
                    or any(term in lowered for term in terms)
                ):
                    turn_texts.append(content)
                    changed.add(str(t.get("turn_id")))
                    t = {**t, "content": ERASED}
                new_turns.append(t)
            if changed:
                tr.turns = new_turns
                turns_redacted += len(changed)
                transcripts_redacted += 1
                redacted_ids[tr.id] = changed
        needles = _needles([*needles, *turn_texts, *_sentences(turn_texts)])

        episodes_redacted = 0
        for ep in EpisodeRepository(session).for_transcripts(namespace, list(redacted_ids)):
            quotes = bool(set(ep.turn_ids) & redacted_ids[ep.transcript_id]) or any(n in ep.summary for n in needles)
            if quotes:
                ep.summary, ep.entities, ep.embedding, ep.search_text = ERASED, [], None, ""
                episodes_redacted += 1
            else:
                ep.entities = [e for e in ep.entities if not any(e in txt for txt in turn_texts)]
                ep.search_text = episode_search_text(ep.summary, ep.entities)

        memories.delete_many(namespace, [r.id for r in rows])
        audit_rows = AuditRepository(session).scrub(namespace, [r.id for r in rows], needles)
        tombs = TombstoneRepository(session)
        for r in rows:
            tombs.add(memory_id=r.id, namespace=namespace, erase_id=erase_id, scope=scope, actor=actor)
            AuditRepository(session).add(
                memory_id=r.id,
                namespace=namespace,
                action="erased",
                actor=actor,
                from_state=r.state,
                to_state=None,
                detail={"erase_id": str(erase_id), "scope": scope},
            )
    erased = [r.id for r in rows]
    log_lines = scrub_log_file(log_file, erased, needles) if log_file else 0
    for mid in erased:
        log.info("memory.erased", memory_id=str(mid), namespace=namespace, actor=actor, erase_id=str(erase_id))
    return EraseResult(
        erase_id=erase_id,
        namespace=namespace,
        memory_ids=erased,
        transcripts_redacted=transcripts_redacted,
        turns_redacted=turns_redacted,
        episodes_redacted=episodes_redacted,
        audit_rows_scrubbed=audit_rows,
        log_lines_scrubbed=log_lines,
    )


_GENERIC_KEY = re.compile(r"^[a-z_]+(\.[a-z_]+)*$")


def _is_private_key(key: str) -> bool:
    """Keys like `user.database` say nothing private; keys naming a person (`colleague:li.city`) do."""
    return not _GENERIC_KEY.match(key)


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


def scrub_log_file(path: Path, memory_ids: Sequence[uuid.UUID], needles: Sequence[str]) -> int:
    """Rewrite the JSON-lines log in place: lines about an erased memory keep only ids and event names, and
    the erased text is cut out of every other line. In place (not a rename) so processes appending to the
    file keep writing to it."""
    if not path.exists():
        return 0
    ids = {str(m) for m in memory_ids}
    changed = 0
    with path.open("r+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            lines = fh.read().splitlines()
            out: list[str] = []
            for line in lines:
                new = _scrub_line(line, ids, needles)
                changed += new != line
                out.append(new)
            if changed:
                fh.seek(0)
                fh.write("\n".join(out) + ("\n" if out else ""))
                fh.truncate()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    return changed


def _scrub_line(line: str, ids: set[str], needles: Sequence[str]) -> str:
    try:
        event = json.loads(line)
    except ValueError:
        for n in needles:
            line = line.replace(n, ERASED)
        return line
    if not isinstance(event, dict):
        return line
    if str(event.get("memory_id")) in ids or str(event.get("other_memory_id")) in ids:
        event = {k: v for k, v in event.items() if k in _LOG_SAFE_FIELDS}
        event["erased"] = True
    new = json.dumps(scrub_json(event, needles, ERASED), ensure_ascii=False)
    return line if json.loads(line) == json.loads(new) else new


__all__ = [
    "FORGOTTEN",
    "StateConflict",
    "erase",
    "forget",
    "remember",
    "scrub_log_file",
    "unforget",
    "verify",
    "write_memory",
]
