"""Memories: list and get (read), and the privileged writes: write a fact, remember free text, forget,
unforget, verify. (Irreversible erase: routes/erase.py; recall by query: routes/search.py.)"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api.deps import ActorDep, EmbedderDep, NamespacePath, ReadSessionDep, SettingsDep, WriteSessionDep
from hindsight.services import memory_reads as memory_service
from hindsight.services import privileged_writes
from schemas.memories import (
    ForgetIn,
    MemoryDetail,
    MemoryPage,
    MemoryRead,
    MemoryWrite,
    RememberIn,
    RememberResult,
    VerifyIn,
    WriteResult,
)
from schemas.pipeline import MemoryKind

router = APIRouter(prefix="/v1/namespaces/{namespace}")

MemoryStateParam = Literal["active", "stale", "archived", "quarantined", "forgotten"]
LISTED_BY_DEFAULT = ("active", "stale", "archived", "quarantined")
"""Forgotten memories are listed only when asked for (`?state=forgotten`)."""


# -- reading ----------------------------------------------------------------------------------------------


@router.get("/memories", response_model=MemoryPage, tags=["memories"])
def list_memories(
    namespace: NamespacePath,
    session: ReadSessionDep,
    state: Annotated[list[MemoryStateParam] | None, Query()] = None,
    kind: Annotated[list[MemoryKind] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> MemoryPage:
    """Memories of a namespace, newest change first, filtered by state (forgotten ones only on request)."""
    return memory_service.list_memories(
        session,
        namespace,
        states=list(state) if state else list(LISTED_BY_DEFAULT),
        kinds=[k.value for k in kind] if kind else None,
        limit=limit,
        offset=offset,
    )


@router.get("/memories/{memory_id}", response_model=MemoryDetail, tags=["memories"])
def get_memory(namespace: NamespacePath, memory_id: uuid.UUID, session: ReadSessionDep) -> MemoryDetail:
    """One memory with its provenance (transcript turns), audit history and conflicts."""
    return memory_service.get_memory(session, namespace, memory_id)


# -- privileged writes ------------------------------------------------------------------------------------


@router.post("/memories", status_code=201, response_model=WriteResult, tags=["privileged"])
def write_memory(
    namespace: NamespacePath,
    body: MemoryWrite,
    session: WriteSessionDep,
    embedder: EmbedderDep,
    settings: SettingsDep,
    actor: ActorDep,
) -> WriteResult:
    """Write a structured fact. It is reconciled like a distilled fact: a duplicate refreshes, a refinement
    merges, a contradiction is recorded as a conflict (`action` says which)."""
    return privileged_writes.write_memory(session, namespace, body, embedder=embedder, settings=settings, actor=actor)


@router.post("/remember", status_code=201, response_model=RememberResult, tags=["privileged"])
def remember(
    namespace: NamespacePath,
    body: RememberIn,
    session: WriteSessionDep,
    embedder: EmbedderDep,
    settings: SettingsDep,
    actor: ActorDep,
) -> RememberResult:
    """Remember free text: the offline extractor's stable facts, or the text itself as one note."""
    return privileged_writes.remember(
        session, namespace, body.content, body.metadata, embedder=embedder, settings=settings, actor=actor
    )


@router.post("/memories/{memory_id}/forget", response_model=MemoryRead, tags=["privileged"])
def forget(
    namespace: NamespacePath,
    memory_id: uuid.UUID,
    session: WriteSessionDep,
    actor: ActorDep,
    body: ForgetIn | None = None,
) -> MemoryRead:
    """Soft forget: out of search, context and lists, kept for audit; undo with /unforget."""
    return privileged_writes.forget(session, namespace, memory_id, actor=actor, reason=body.reason if body else None)


@router.post("/memories/{memory_id}/unforget", response_model=MemoryRead, tags=["privileged"])
def unforget(namespace: NamespacePath, memory_id: uuid.UUID, session: WriteSessionDep, actor: ActorDep) -> MemoryRead:
    """Undo a forget: the memory gets back the state it had."""
    return privileged_writes.unforget(session, namespace, memory_id, actor=actor)


@router.post("/memories/{memory_id}/verify", response_model=MemoryRead, tags=["privileged"])
def verify(
    namespace: NamespacePath,
    memory_id: uuid.UUID,
    session: WriteSessionDep,
    actor: ActorDep,
    body: VerifyIn | None = None,
) -> MemoryRead:
    """Re-confirm: confidence up (capped by source), last_verified_at now, a stale/archived memory revived."""
    return privileged_writes.verify(
        session, namespace, memory_id, actor=actor, confidence=body.confidence if body else None
    )
