"""The thin HTTP API: each route makes one service call. OpenAPI at /openapi.json, docs at /docs.

Every /v1 route needs `Authorization: Bearer <token>` unless auth.mode is `none` (api/auth.py): 401 without a
valid token, 403 for a namespace outside the token's grant (decided before any lookup), 404 for an id that
is not in the namespace. The namespace comes from the URL only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import structlog
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import Authenticator, Forbidden, LoopbackOnly, Principal, Unauthorized, bearer
from hindsight import __version__
from hindsight.config import Settings, get_settings
from hindsight.db.engine import get_engine, read_session, session_scope
from hindsight.db.repositories import TranscriptRepository
from hindsight.errors import InvalidInput, NotFound, TransientError
from hindsight.logging import configure_logging
from hindsight.queue import Publisher
from hindsight.services import erase as erase_service
from hindsight.services import memories as memory_service
from hindsight.services import memory_ops
from hindsight.services.context import ContextBlock, assemble_context, fit_to_budget
from hindsight.services.ingest import publish_transcripts
from hindsight.services.recall import MAX_QUERY_CHARS, MAX_TOP_K, recall, recall_episodes, recall_rounds
from hindsight.services.sessions import SessionStore, session_store
from pipeline.base import Embedder
from schemas.events import (
    NAMESPACE_PATTERN,
    TranscriptAccepted,
    TranscriptBody,
    TranscriptIn,
    TranscriptStatus,
    TurnIn,
)
from schemas.inputs import json_safe
from schemas.memories import (
    EpisodeRead,
    EraseResult,
    EraseSubjectIn,
    ForgetIn,
    MemoryDetail,
    MemoryPage,
    MemoryRead,
    MemoryWrite,
    RememberIn,
    RememberResult,
    VerifyIn,
    WorkingMemory,
    WorkingMemoryTurn,
    WriteResult,
)
from schemas.pipeline import MemoryKind
from schemas.recall import EpisodeRecallResult, RecallResult, RoundRecallResult
from workers.publisher import CeleryPublisher

log = structlog.get_logger(__name__)


@dataclass
class State:
    settings: Settings
    engine: Engine
    embedder: Embedder | None
    redis_url: str
    auth: Authenticator
    publisher: Publisher


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
        refused = False

        async def limited() -> Message:
            # Answer 413 ourselves and tell the app the client is gone: raising here would reach FastAPI's
            # body parser, which turns any exception into "400 There was an error parsing the body".
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    if not refused:
                        refused = True
                        await _too_large(send, self.limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            if not refused:  # the app's own answer to the disconnect is dropped: 413 already went out
                await send(message)

        await self.app(scope, limited, guarded)


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


MemoryStateParam = Literal["active", "stale", "archived", "quarantined", "forgotten"]
LISTED_BY_DEFAULT = ("active", "stale", "archived", "quarantined")
"""Forgotten memories are listed only when asked for (`?state=forgotten`)."""


def create_app(settings: Settings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    settings = settings or get_settings()
    # Resolved now, not in the lifespan: a process that would run open by mistake must not start at all.
    auth = Authenticator.from_settings(settings)

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
            auth=auth,
            publisher=CeleryPublisher.for_settings(settings),
        )
        log.info("api.started", version=__version__, auth=auth.mode)
        yield
        app.state.hs.engine.dispose()

    app = FastAPI(
        title="hindsight",
        version=__version__,
        description="Long-term memory for LLM agents, distilled after the fact.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, limit=settings.limits.max_transcript_bytes * 2)
    # Added last, so it runs first: a request from a rebound DNS name is refused before anything is read.
    app.add_middleware(LoopbackOnly, enabled=not auth.enabled)

    @app.exception_handler(RequestValidationError)
    async def _unprocessable(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes the input, and fails (500) when it holds NaN or an unpaired surrogate.
        return JSONResponse(status_code=422, content={"detail": json_safe(jsonable_encoder(exc.errors()))})

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.exception_handler(TransientError)
    async def _unavailable(_: Request, exc: TransientError) -> JSONResponse:
        # e.g. a session's pending turns could not be handed over yet: nothing was stored, retry the call.
        return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": "5"})

    @app.exception_handler(memory_ops.StateConflict)
    async def _conflict(_: Request, exc: memory_ops.StateConflict) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    @app.exception_handler(Unauthorized)
    async def _unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return JSONResponse(status_code=401, content={"detail": str(exc)}, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return JSONResponse(status_code=403, content={"detail": str(exc)})

    _routes(app)
    return app


def get_state(request: Request) -> State:
    return request.app.state.hs  # type: ignore[no-any-return]


StateDep = Annotated[State, Depends(get_state)]
SessionIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")]


def _principal(request: Request, state: StateDep) -> Principal:
    return state.auth.authenticate(bearer(request.headers.get("authorization")))


PrincipalDep = Annotated[Principal, Depends(_principal)]


def _namespace(
    namespace: Annotated[str, Path(pattern=NAMESPACE_PATTERN, max_length=128)], principal: PrincipalDep
) -> str:
    principal.require(namespace)
    return namespace


NamespacePath = Annotated[str, Depends(_namespace)]
"""The URL's namespace, once the caller's token is known to grant it."""


def _actor(principal: PrincipalDep) -> str:
    return f"api/{principal.name}"


ActorDep = Annotated[str, Depends(_actor)]


def _read(state: StateDep) -> Iterator[Any]:
    with read_session(state.engine) as session:
        yield session


def _write(state: StateDep) -> Iterator[Any]:
    with session_scope(state.engine) as session:
        yield session


ReadDep = Annotated[Any, Depends(_read)]
WriteDep = Annotated[Any, Depends(_write)]
"""For reads that also count accesses: committed after the route returns."""


def _unit(state: State) -> Any:
    """A write's unit of work, committed before the response goes out (so the caller's next read sees it);
    a yield dependency may commit only after the response has been sent."""
    return session_scope(state.engine)


def _embedder(state: State) -> Embedder:
    if state.embedder is None:
        raise HTTPException(503, "embedder not loaded")
    return state.embedder


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

    # -- ingest and working memory -------------------------------------------------------------------------
    @app.post(
        "/v1/namespaces/{namespace}/transcripts",
        status_code=202,
        response_model=TranscriptAccepted,
        tags=["ingest"],
    )
    def ingest(namespace: NamespacePath, body: TranscriptBody, state: StateDep) -> TranscriptAccepted:
        """Accept a transcript (conversation end or turn threshold) for distillation."""
        event = TranscriptIn(namespace=namespace, **body.model_dump())
        with _unit(state) as session:
            accepted = publish_transcripts(session, [event], publisher=state.publisher, settings=state.settings)
        return accepted[0]

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
        namespace: NamespacePath, session_id: SessionIdPath, turn: TurnIn, state: StateDep
    ) -> dict[str, bool]:
        """Append a turn to a live session; every `max_turns` turns a turn-threshold event is published.

        Secrets are redacted before the turn is stored. A turn over the ingest limits is a 422 and stores
        nothing; pending turns are published early rather than outgrow a transcript (503, nothing stored,
        when that hand-over cannot happen yet)."""
        return {"threshold_fired": _sessions(state).append(namespace, session_id, turn)}

    @app.get("/v1/namespaces/{namespace}/sessions/{session_id}", response_model=WorkingMemory, tags=["sessions"])
    def working_memory(namespace: NamespacePath, session_id: SessionIdPath, state: StateDep) -> WorkingMemory:
        """Working memory: the session's last `max_turns` turns within `max_tokens`, oldest first.

        404 when the session is unknown or expired (`working_memory.ttl_seconds` after its last turn)."""
        store = _sessions(state)
        if not store.exists(namespace, session_id):
            raise NotFound(f"session {session_id} not found (unknown, or expired after its last turn)")
        turns = [WorkingMemoryTurn.model_validate(t) for t in store.window(namespace, session_id)]
        return WorkingMemory(namespace=namespace, session_id=session_id, turns=turns)

    @app.post("/v1/namespaces/{namespace}/sessions/{session_id}/end", tags=["sessions"])
    def end_session(namespace: NamespacePath, session_id: SessionIdPath, state: StateDep) -> dict[str, bool]:
        """End a session: its remaining turns are published as a conversation-end event (dead-lettered, with
        the reason, if they can never be; 503 and kept for a retry if PostgreSQL cannot take them now)."""
        return {"published": _sessions(state).end(namespace, session_id)}

    # -- reading ------------------------------------------------------------------------------------------
    @app.get("/v1/namespaces/{namespace}/memories", response_model=MemoryPage, tags=["memories"])
    def list_memories(
        namespace: NamespacePath,
        session: ReadDep,
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

    @app.get("/v1/namespaces/{namespace}/memories/{memory_id}", response_model=MemoryDetail, tags=["memories"])
    def get_memory(namespace: NamespacePath, memory_id: uuid.UUID, session: ReadDep) -> MemoryDetail:
        """One memory with its provenance (transcript turns), audit history and conflicts."""
        return memory_service.get_memory(session, namespace, memory_id)

    @app.get("/v1/namespaces/{namespace}/search", response_model=RecallResult, tags=["memories"])
    def search(
        namespace: NamespacePath,
        state: StateDep,
        session: WriteDep,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
        top_k: Annotated[int | None, Query(ge=1, le=MAX_TOP_K)] = None,
        include: Annotated[
            list[Literal["archived", "quarantined"]] | None,
            Query(description="Also search these states (active and stale always are)."),
        ] = None,
        min_score: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
        budget_tokens: Annotated[
            int | None,
            Query(
                ge=64, le=1_000_000, description="Only the hits that fit in this many tokens, as /context renders them."
            ),
        ] = None,
        model: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    ) -> RecallResult:
        """Hybrid recall (vector + keyword + recency + trust) within the namespace, best first; with
        `budget_tokens`, the hits the context block would admit within it (counted with `model`'s tokenizer;
        default llm.model) and the tokens they take."""
        found = recall(
            session,
            namespace,
            q,
            embedder=_embedder(state),
            settings=state.settings.retrieval,
            top_k=top_k,
            states=("active", "stale", *(include or ())),
            min_score=min_score,
        )
        if budget_tokens is None:
            return found
        return fit_to_budget(found, budget_tokens=budget_tokens, model=model or state.settings.llm.model)

    @app.get("/v1/namespaces/{namespace}/context", response_model=ContextBlock, tags=["memories"])
    def context(
        namespace: NamespacePath,
        state: StateDep,
        session: WriteDep,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
        budget_tokens: Annotated[int, Query(ge=64, le=1_000_000)] = 1000,
        model: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        top_k: Annotated[int | None, Query(ge=1, le=MAX_TOP_K)] = None,
        episodes: Annotated[
            bool, Query(description="Also summaries of earlier conversations, after the memories.")
        ] = True,
        rounds: Annotated[
            bool, Query(description="Also turns of earlier conversations (a user turn and the start of its reply).")
        ] = True,
    ) -> ContextBlock:
        """The best memories for `q` (and, unless turned off, the most relevant earlier conversations and
        turns) as a block for the end of a system prompt, within `budget_tokens` (counted with `model`'s
        tokenizer; default llm.model)."""
        return assemble_context(
            session,
            namespace,
            q,
            embedder=_embedder(state),
            settings=state.settings.retrieval,
            budget_tokens=budget_tokens,
            model=model or state.settings.llm.model,
            top_k=top_k,
            episodes=episodes,
            rounds=rounds,
        )

    @app.get("/v1/namespaces/{namespace}/rounds/search", response_model=RoundRecallResult, tags=["memories"])
    def search_rounds(
        namespace: NamespacePath,
        state: StateDep,
        session: ReadDep,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
        top_k: Annotated[int | None, Query(ge=1, le=MAX_TOP_K)] = None,
    ) -> RoundRecallResult:
        """Rounds (a user turn of an earlier conversation and the start of the reply) that best match `q` by
        meaning and keywords, including the facts distilled from them, best first: what was said in passing."""
        return recall_rounds(
            session, namespace, q, embedder=_embedder(state), settings=state.settings.retrieval, top_k=top_k
        )

    @app.get("/v1/namespaces/{namespace}/episodes/search", response_model=EpisodeRecallResult, tags=["memories"])
    def search_episodes(
        namespace: NamespacePath,
        state: StateDep,
        session: ReadDep,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
        top_k: Annotated[int | None, Query(ge=1, le=MAX_TOP_K)] = None,
    ) -> EpisodeRecallResult:
        """Episode summaries (what happened in earlier conversations, with the turns they quote) that best match
        `q` by meaning and keywords, best first: for "when did I …" / "what did I say about …", where no stable
        fact was kept."""
        return recall_episodes(
            session, namespace, q, embedder=_embedder(state), settings=state.settings.retrieval, top_k=top_k
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

    # -- privileged writes --------------------------------------------------------------------------------
    @app.post("/v1/namespaces/{namespace}/memories", status_code=201, response_model=WriteResult, tags=["privileged"])
    def write_memory(namespace: NamespacePath, body: MemoryWrite, state: StateDep, actor: ActorDep) -> WriteResult:
        """Write a structured fact. It is reconciled like a distilled fact: a duplicate refreshes, a refinement
        merges, a contradiction is recorded as a conflict (`action` says which)."""
        with _unit(state) as session:
            return memory_ops.write_memory(
                session, namespace, body, embedder=_embedder(state), settings=state.settings, actor=actor
            )

    @app.post(
        "/v1/namespaces/{namespace}/remember", status_code=201, response_model=RememberResult, tags=["privileged"]
    )
    def remember(namespace: NamespacePath, body: RememberIn, state: StateDep, actor: ActorDep) -> RememberResult:
        """Remember free text: the offline extractor's stable facts, or the text itself as one note."""
        with _unit(state) as session:
            return memory_ops.remember(
                session,
                namespace,
                body.content,
                body.metadata,
                embedder=_embedder(state),
                settings=state.settings,
                actor=actor,
            )

    @app.post("/v1/namespaces/{namespace}/memories/{memory_id}/forget", response_model=MemoryRead, tags=["privileged"])
    def forget(
        namespace: NamespacePath,
        memory_id: uuid.UUID,
        state: StateDep,
        actor: ActorDep,
        body: ForgetIn | None = None,
    ) -> MemoryRead:
        """Soft forget: out of search, context and lists, kept for audit; undo with /unforget."""
        with _unit(state) as session:
            return memory_ops.forget(session, namespace, memory_id, actor=actor, reason=body.reason if body else None)

    @app.post(
        "/v1/namespaces/{namespace}/memories/{memory_id}/unforget", response_model=MemoryRead, tags=["privileged"]
    )
    def unforget(namespace: NamespacePath, memory_id: uuid.UUID, state: StateDep, actor: ActorDep) -> MemoryRead:
        """Undo a forget: the memory gets back the state it had."""
        with _unit(state) as session:
            return memory_ops.unforget(session, namespace, memory_id, actor=actor)

    @app.post("/v1/namespaces/{namespace}/memories/{memory_id}/verify", response_model=MemoryRead, tags=["privileged"])
    def verify(
        namespace: NamespacePath,
        memory_id: uuid.UUID,
        state: StateDep,
        actor: ActorDep,
        body: VerifyIn | None = None,
    ) -> MemoryRead:
        """Re-confirm: confidence up (capped by source), last_verified_at now, a stale/archived memory revived."""
        with _unit(state) as session:
            return memory_ops.verify(
                session, namespace, memory_id, actor=actor, confidence=body.confidence if body else None
            )

    @app.delete("/v1/namespaces/{namespace}/memories/{memory_id}", response_model=EraseResult, tags=["privileged"])
    def erase_memory(namespace: NamespacePath, memory_id: uuid.UUID, state: StateDep, actor: ActorDep) -> EraseResult:
        """Erase for real (cannot be undone): the row, its embedding and provenance, the source turns, episodes
        quoting them, and its text in the audit history, sessions and log files. A tombstone without content
        stays."""
        with _unit(state) as session:
            return erase_service.erase(
                session, namespace, memory_ids=[memory_id], actor=actor, outside=_outside(state)
            )

    @app.post("/v1/namespaces/{namespace}/erase", response_model=EraseResult, tags=["privileged"])
    def erase_subject(namespace: NamespacePath, body: EraseSubjectIn, state: StateDep, actor: ActorDep) -> EraseResult:
        """Erase everything of a subject in the namespace (cannot be undone): memories whose key starts with
        `key_prefix` or whose subject is `subject`, as DELETE /memories/{id} does for one, and every transcript
        turn, episode and working-memory turn of the namespace that names the subject."""
        if not body.key_prefix and not body.subject:
            raise InvalidInput("name a key_prefix or a subject to erase")
        with _unit(state) as session:
            return erase_service.erase(
                session,
                namespace,
                key_prefix=body.key_prefix,
                subject=body.subject,
                actor=actor,
                outside=_outside(state),
            )

    @app.delete(
        "/v1/namespaces/{namespace}/transcripts/{transcript_id}", response_model=EraseResult, tags=["privileged"]
    )
    def erase_transcript(
        namespace: NamespacePath, transcript_id: uuid.UUID, state: StateDep, actor: ActorDep
    ) -> EraseResult:
        """Erase one transcript (cannot be undone): its turns, its episode and its provenance records go;
        memories whose only source it was are erased (tombstones stay), the others lose that provenance.
        404 when the transcript is not in the namespace."""
        with _unit(state) as session:
            return erase_service.erase_transcript(
                session, namespace, transcript_id, actor=actor, outside=_outside(state)
            )

    @app.delete("/v1/namespaces/{namespace}", response_model=EraseResult, tags=["privileged"])
    def erase_namespace(
        namespace: NamespacePath,
        state: StateDep,
        actor: ActorDep,
        confirm: Annotated[str, Query(description="The namespace again: this cannot be undone.")],
    ) -> EraseResult:
        """Erase the whole namespace (an end user leaving; cannot be undone): every memory, transcript, episode,
        provenance record and working-memory session, the detail of its audit history, and its log lines.
        Content-free tombstones and `erased` audit records stay. `confirm` must repeat the namespace (422)."""
        if confirm != namespace:
            raise InvalidInput("confirm must repeat the namespace to erase it")
        with _unit(state) as session:
            return erase_service.erase_namespace(session, namespace, actor=actor, outside=_outside(state))


def _outside(state: State) -> erase_service.Outside:
    """What an erase scrubs after its commit: this API's sessions and every log file of the settings."""
    return erase_service.Outside(erase_service.log_files(state.settings), _sessions(state))


def _sessions(state: State) -> SessionStore:
    return session_store(state.settings, redis_url=state.redis_url, publisher=state.publisher, engine=state.engine)


def app_factory() -> FastAPI:
    """Entry point for `uvicorn --factory api.app:app_factory`."""
    return create_app()
