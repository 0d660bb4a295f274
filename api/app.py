"""The thin HTTP API: the app factory, its middleware and error handlers. The routes are in api/routes/
(one module per resource, each route a thin call into hindsight.services), what they depend on in
api/deps.py. OpenAPI at /openapi.json, docs at /docs.

Every /v1 route needs `Authorization: Bearer <token>` unless auth.mode is `none` (api/auth.py): 401 without a
valid token, 403 for a namespace outside the token's grant (decided before any lookup), 404 for an id that
is not in the namespace. The namespace comes from the URL only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import Authenticator, Forbidden, LoopbackOnly, Unauthorized
from api.deps import AppState
from api.routes import ROUTERS
from hindsight import __version__
from hindsight.config import Settings, get_settings
from hindsight.db.engine import ReadRouter, get_engine
from hindsight.errors import InvalidInput, NotFound, TransientError
from hindsight.logging import configure_logging
from hindsight.services import privileged_writes
from pipeline.base import Embedder
from schemas.events import LSN_HEADER
from schemas.inputs import json_safe
from workers.publisher import CeleryPublisher

log = structlog.get_logger(__name__)


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


class WritePosition:
    """With a read replica configured, answer every successful write with `X-Hindsight-LSN`: the primary's WAL
    position once the write has committed. A later read that sends it back as `X-Hindsight-Min-LSN` sees the
    write (api/deps.py `_read_session`). The routes' units of work commit before the response starts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                state = getattr(scope["app"].state, "hs", None)
                if isinstance(state, AppState) and state.reads.replica is not None:
                    lsn = await anyio.to_thread.run_sync(state.reads.write_position)
                    if lsn is not None:
                        message["headers"] = [*message.get("headers", []), (LSN_HEADER.encode(), lsn.encode())]
            await send(message)

        await self.app(scope, receive, stamped)


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
    # Resolved now, not in the lifespan: a process that would run open by mistake must not start at all.
    auth = Authenticator.from_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings)
        from hindsight.broker import resolve_redis_url
        from hindsight.embeddings import build_embedder

        engine = get_engine(settings)
        state = AppState(
            settings=settings,
            engine=engine,
            reads=ReadRouter.for_settings(settings, engine),
            embedder=embedder or build_embedder(settings.embedding),
            redis_url=resolve_redis_url(settings),
            auth=auth,
            publisher=CeleryPublisher.for_settings(settings),
        )
        app.state.hs = state
        log.info("api.started", version=__version__, auth=auth.mode)
        yield
        state.engine.dispose()
        if state.reads.replica is not None:
            state.reads.replica.dispose()

    app = FastAPI(
        title="hindsight",
        version=__version__,
        description="Long-term memory for LLM agents, distilled after the fact.",
        lifespan=lifespan,
    )
    app.add_middleware(WritePosition)
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

    @app.exception_handler(privileged_writes.StateConflict)
    async def _conflict(_: Request, exc: privileged_writes.StateConflict) -> JSONResponse:
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

    for router in ROUTERS:
        app.include_router(router)
    return app


def app_factory() -> FastAPI:
    """Entry point for `uvicorn --factory api.app:app_factory`."""
    return create_app()
