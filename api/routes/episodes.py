"""Episode summaries (one per distilled transcript) as a list. (Episodes by query: routes/search.py.)"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import NamespacePath, ReadSessionDep
from hindsight.services import memory_reads as memory_service
from schemas.memories import EpisodeRead

router = APIRouter(prefix="/v1/namespaces/{namespace}", tags=["memories"])


@router.get("/episodes", response_model=list[EpisodeRead])
def list_episodes(
    namespace: NamespacePath,
    session: ReadSessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[EpisodeRead]:
    """Episode summaries (one per distilled transcript), newest first."""
    return memory_service.list_episodes(session, namespace, limit=limit, offset=offset)
