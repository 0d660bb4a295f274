"""The thin HTTP API: each route makes one service call. OpenAPI at /openapi.json, docs at /docs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import structlog
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hindsight import __version__
from hindsight.config import Settings, get_settings
from hindsight.db.engine import get_engine, read_session, session_scope
from hindsight.db.repositories import TranscriptRepository
from hindsight.errors import InvalidInput, NotFound
from hindsight.logging import configure_logging
from hindsight.services import memories as memory_service
from hindsight.services.ingest import publish_transcripts
from hindsight.services.sessions import SessionStore
from pipeline.base import Embedder
from schemas.events import (
    NAMESPACE_PATTERN,
    TranscriptAccepted,
    TranscriptBody,
    TranscriptIn,
    TranscriptStatus,
    TurnIn,
)
from schemas.memories import EpisodeRead, MemoryDetail, MemoryPage, SearchResult
from schemas.pipeline import MemoryKind, MemoryState

log = structlog.get_logger(__name__)


@dataclass
class State:
    settings: Settings
    engine: Engine
    embedder: Embedder | None
    redis_url: str


class BodyLimit:
    """Reject bodies over `limit` bytes with 413 before they are buffered whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await _too_large(send, self.limit)


class _TooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = f'{{"detail":"request body exceeds {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def create_app(settings: Settings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings)
        from hindsight.broker import resolve_redis_url
        from hindsight.embeddings import build_embedder

        app.state.hs = State(
            settings=settings,
            engine=get_engine(settings),
            embedder=embedder or build_embedder(settings.embedding),
            redis_url=resolve_redis_url(settings),
        )
        log.info("api.started", version=__version__)
        yield
        app.state.hs.engine.dispose()

    app = FastAPI(
        title="hindsight",
        version=__version__,
        description="Long-term memory for LLM agents, distilled after the fact.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, limit=settings.limits.max_transcript_bytes * 2)

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    _routes(app)
    return app


def get_state(request: Request) -> State:
    return request.app.state.hs  # type: ignore[no-any-return]


StateDep = Annotated[State, Depends(get_state)]
NamespacePath = Annotated[str, Path(pattern=NAMESPACE_PATTERN, max_length=128)]


def _read(state: StateDep) -> Iterator[Any]:
    with read_session(state.engine) as session:
        yield session


def _write(state: StateDep) -> Iterator[Any]:
    with session_scope(state.engine) as session:
        yield session


ReadDep = Annotated[Any, Depends(_read)]
WriteDep = Annotated[Any, Depends(_write)]


def _routes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz(state: StateDep) -> JSONResponse:
        """Readiness: PostgreSQL and Redis answer."""
        from hindsight.broker import redis_client

        checks: dict[str, str] = {}
        try:
            with state.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            checks["postgres"] = "ok"
        except Exception as exc:  # report, don't crash: this endpoint exists to say what is down
            checks["postgres"] = f"error: {type(exc).__name__}"
        try:
            redis_client(state.redis_url).ping()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {type(exc).__name__}"
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse(status_code=200 if ok else 503, content={"ready": ok, "checks": checks})

    @app.post(
        "/v1/namespaces/{namespace}/transcripts",
        status_code=202,
        response_model=TranscriptAccepted,
        tags=["ingest"],
    )
    def ingest(namespace: NamespacePath, body: TranscriptBody, state: StateDep) -> TranscriptAccepted:
        """Accept a transcript (conversation end or turn threshold) for distillation."""
        event = TranscriptIn(namespace=namespace, **body.model_dump())
        return publish_transcripts([event], settings=state.settings, engine=state.engine)[0]

    @app.get(
        "/v1/namespaces/{namespace}/transcripts/{transcript_id}",
        response_model=TranscriptStatus,
        tags=["ingest"],
    )
    def transcript_status(namespace: NamespacePath, transcript_id: uuid.UUID, session: ReadDep) -> Any:
        """Processing state of one transcript, with its error history if it failed."""
        row = TranscriptRepository(session).get_in_namespace(namespace, transcript_id)
        if row is None:
            raise NotFound(f"transcript {transcript_id} not found")
        return TranscriptStatus.model_validate(row)

    @app.post("/v1/namespaces/{namespace}/sessions/{session_id}/turns", tags=["sessions"])
    def append_turn(
        namespace: NamespacePath,
        session_id: Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")],
        turn: TurnIn,
        state: StateDep,
    ) -> dict[str, bool]:
        """Append a turn to a live session; every `max_turns` turns a turn-threshold event is published."""
        return {"threshold_fired": _sessions(state).append(namespace, session_id, turn)}

    @app.post("/v1/namespaces/{namespace}/sessions/{session_id}/end", tags=["sessions"])
    def end_session(
        namespace: NamespacePath,
        session_id: Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")],
        state: StateDep,
    ) -> dict[str, bool]:
        """End a session: its remaining turns are published as a conversation-end event."""
        return {"published": _sessions(state).end(namespace, session_id)}

    @app.get("/v1/namespaces/{namespace}/memories", response_model=MemoryPage, tags=["memories"])
    def list_memories(
        namespace: NamespacePath,
        session: ReadDep,
        state: Annotated[list[MemoryState] | None, Query()] = None,
        kind: Annotated[list[MemoryKind] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> MemoryPage:
        """Memories of a namespace, newest change first, filtered by state and kind."""
        return memory_service.list_memories(
            session,
            namespace,
            states=[s.value for s in state] if state else None,
            kinds=[k.value for k in kind] if kind else None,
            limit=limit,
            offset=offset,
        )

    @app.get("/v1/namespaces/{namespace}/memories/{memory_id}", response_model=MemoryDetail, tags=["memories"])
    def get_memory(namespace: NamespacePath, memory_id: uuid.UUID, session: ReadDep) -> MemoryDetail:
        """One memory with its provenance (transcript turns), audit history and conflicts."""
        return memory_service.get_memory(session, namespace, memory_id)

    @app.get("/v1/namespaces/{namespace}/search", response_model=SearchResult, tags=["memories"])
    def search(
        namespace: NamespacePath,
        state: StateDep,
        session: WriteDep,
        q: Annotated[str, Query(min_length=1, max_length=memory_service.MAX_QUERY_CHARS)],
        top_k: Annotated[int | None, Query(ge=1, le=100)] = None,
    ) -> SearchResult:
        """Vector similarity search within the namespace (active and stale memories)."""
        if state.embedder is None:
            raise HTTPException(503, "embedder not loaded")
        return memory_service.search_memories(
            session, namespace, q, embedder=state.embedder, top_k=top_k or state.settings.retrieval.top_k
        )

    @app.get("/v1/namespaces/{namespace}/episodes", response_model=list[EpisodeRead], tags=["memories"])
    def list_episodes(
        namespace: NamespacePath,
        session: ReadDep,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> list[EpisodeRead]:
        """Episode summaries (one per distilled transcript), newest first."""
        return memory_service.list_episodes(session, namespace, limit=limit, offset=offset)


def _sessions(state: State) -> SessionStore:
    from hindsight.broker import redis_client
    from hindsight.services.ingest import publish_transcript

    return SessionStore(
        redis=redis_client(state.redis_url),
        settings=state.settings.working_memory,
        publish=lambda event: publish_transcript(event, settings=state.settings, engine=state.engine),
    )


def app_factory() -> FastAPI:
    """Entry point for `uvicorn --factory api.app:app_factory`."""
    return create_app()
