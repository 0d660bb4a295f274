"""Live sessions (working memory in Redis): append a turn, read the window, end the session."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import NamespacePath, SessionIdPath, SessionStoreDep
from hindsight.errors import NotFound
from schemas.events import TurnIn
from schemas.memories import WorkingMemory, WorkingMemoryTurn

router = APIRouter(prefix="/v1/namespaces/{namespace}/sessions/{session_id}", tags=["sessions"])


@router.post("/turns")
def append_turn(
    namespace: NamespacePath, session_id: SessionIdPath, turn: TurnIn, store: SessionStoreDep
) -> dict[str, bool]:
    """Append a turn to a live session; every `max_turns` turns a turn-threshold event is published.

    Secrets are redacted before the turn is stored. A turn over the ingest limits is a 422 and stores
    nothing; pending turns are published early rather than outgrow a transcript (503, nothing stored,
    when that hand-over cannot happen yet)."""
    return {"threshold_fired": store.append(namespace, session_id, turn)}


@router.get("", response_model=WorkingMemory)
def working_memory(namespace: NamespacePath, session_id: SessionIdPath, store: SessionStoreDep) -> WorkingMemory:
    """Working memory: the session's last `max_turns` turns within `max_tokens`, oldest first.

    404 when the session is unknown or expired (`working_memory.ttl_seconds` after its last turn)."""
    if not store.exists(namespace, session_id):
        raise NotFound(f"session {session_id} not found (unknown, or expired after its last turn)")
    turns = [WorkingMemoryTurn.model_validate(t) for t in store.window(namespace, session_id)]
    return WorkingMemory(namespace=namespace, session_id=session_id, turns=turns)


@router.post("/end")
def end_session(namespace: NamespacePath, session_id: SessionIdPath, store: SessionStoreDep) -> dict[str, bool]:
    """End a session: its remaining turns are published as a conversation-end event (dead-lettered, with
    the reason, if they can never be; 503 and kept for a retry if PostgreSQL cannot take them now)."""
    return {"published": store.end(namespace, session_id)}
