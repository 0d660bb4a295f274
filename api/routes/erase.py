"""Irreversible erase: one memory, a subject, one transcript, a whole namespace (security issue #10).

Every call into services/erase.py from the HTTP API is here. Each erase is one unit of work the route opens
(`UnitOfWorkDep`); after its commit the copies outside PostgreSQL (`Outside`: this API's live sessions and
every log file of the settings) are scrubbed too, and the answer, which counts them, is read only then.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.deps import ActorDep, NamespacePath, SessionStoreDep, SettingsDep, UnitOfWorkDep
from hindsight.errors import InvalidInput
from hindsight.services import erase as erase_service
from schemas.memories import EraseResult, EraseSubjectIn

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["privileged"])


def _outside(settings: SettingsDep, sessions: SessionStoreDep) -> erase_service.Outside:
    """What an erase scrubs after its commit: this API's sessions and every log file of the settings."""
    return erase_service.Outside(erase_service.log_files(settings), sessions)


OutsideDep = Annotated[erase_service.Outside, Depends(_outside)]


@router.delete("/memories/{memory_id}", response_model=EraseResult)
def erase_memory(
    namespace: NamespacePath, memory_id: uuid.UUID, unit: UnitOfWorkDep, actor: ActorDep, outside: OutsideDep
) -> EraseResult:
    """Erase for real (cannot be undone): the row, its embedding and provenance, the source turns, episodes
    quoting them, and its text in the audit history, sessions and log files. A tombstone without content
    stays."""
    with unit() as session:
        result = erase_service.erase(session, namespace, memory_ids=[memory_id], actor=actor, outside=outside)
    return result


@router.post("/erase", response_model=EraseResult)
def erase_subject(
    namespace: NamespacePath, body: EraseSubjectIn, unit: UnitOfWorkDep, actor: ActorDep, outside: OutsideDep
) -> EraseResult:
    """Erase everything of a subject in the namespace (cannot be undone): memories whose key starts with
    `key_prefix` or whose subject is `subject`, as DELETE /memories/{id} does for one, and every transcript
    turn, episode and working-memory turn of the namespace that names the subject."""
    if not body.key_prefix and not body.subject:
        raise InvalidInput("name a key_prefix or a subject to erase")
    with unit() as session:
        result = erase_service.erase(
            session, namespace, key_prefix=body.key_prefix, subject=body.subject, actor=actor, outside=outside
        )
    return result


@router.delete("/transcripts/{transcript_id}", response_model=EraseResult)
def erase_transcript(
    namespace: NamespacePath, transcript_id: uuid.UUID, unit: UnitOfWorkDep, actor: ActorDep, outside: OutsideDep
) -> EraseResult:
    """Erase one transcript (cannot be undone): its turns, its episode and its provenance records go;
    memories whose only source it was are erased (tombstones stay), the others lose that provenance.
    404 when the transcript is not in the namespace."""
    with unit() as session:
        result = erase_service.erase_transcript(session, namespace, transcript_id, actor=actor, outside=outside)
    return result


@router.delete("", response_model=EraseResult)
def erase_namespace(
    namespace: NamespacePath,
    unit: UnitOfWorkDep,
    actor: ActorDep,
    outside: OutsideDep,
    confirm: Annotated[str, Query(description="The namespace again: this cannot be undone.")],
) -> EraseResult:
    """Erase the whole namespace (an end user leaving; cannot be undone): every memory, transcript, episode,
    provenance record and working-memory session, the detail of its audit history, and its log lines.
    Content-free tombstones and `erased` audit records stay. `confirm` must repeat the namespace (422)."""
    if confirm != namespace:
        raise InvalidInput("confirm must repeat the namespace to erase it")
    with unit() as session:
        result = erase_service.erase_namespace(session, namespace, actor=actor, outside=outside)
    return result
