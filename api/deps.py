"""What routes take as dependencies: the app's state, the caller, and the request's unit of work.

Routes get database sessions only from here:
- `ReadSessionDep` for every route that only reads (lists, gets, /search, /context: recall counts accesses
  on its own background thread, services/recall.py `AccessRecorder`, so reads need no write transaction);
  it is rolled back, never committed. It reads from the replica (`database_read_url`) when there is one
  that has replayed the caller's `X-Hindsight-Min-LSN`, else from the primary (`ReadRouter`).
- `WriteSessionDep` for writes: committed when the route returns, before the response goes out (scope
  "function"), so the caller's next read sees the write; rolled back when the route raises.

- `UnitOfWorkDep` only for a write whose answer is known after its commit: an erase scrubs the copies
  outside PostgreSQL (sessions, log files) once the rows are gone and reports what it scrubbed, and a
  function-scoped dependency commits after the response has been serialised. The route opens the unit of
  work and answers after it has closed.

The session store's hand-over commits each batch itself before its turns leave Redis (`SessionStoreDep`);
apart from that and /readyz's ping, nothing reaches the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Path, Request
from sqlalchemy import Engine

from api.auth import Authenticator, Principal, bearer
from hindsight.config import Settings
from hindsight.db.engine import LSN_RE, ReadRouter, ReadSession, Session, session_scope
from hindsight.queue import Publisher
from hindsight.services.sessions import SessionStore, session_store
from pipeline.base import Embedder
from schemas.events import MIN_LSN_HEADER, NAMESPACE_PATTERN


@dataclass(frozen=True)
class AppState:
    """What the lifespan builds once per process (`app.state.hs`)."""

    settings: Settings
    engine: Engine
    reads: ReadRouter
    """Where reads go: the primary, or a replica that has replayed what the caller needs (`database_read_url`)."""
    embedder: Embedder
    redis_url: str
    auth: Authenticator
    publisher: Publisher


def get_state(request: Request) -> AppState:
    state = request.app.state.hs
    if not isinstance(state, AppState):  # the lifespan sets it before the first request
        raise RuntimeError("app.state.hs is not set: the app's lifespan has not run")
    return state


StateDep = Annotated[AppState, Depends(get_state)]


def _settings(state: StateDep) -> Settings:
    return state.settings


def _embedder(state: StateDep) -> Embedder:
    return state.embedder


def _publisher(state: StateDep) -> Publisher:
    return state.publisher


SettingsDep = Annotated[Settings, Depends(_settings)]
EmbedderDep = Annotated[Embedder, Depends(_embedder)]
PublisherDep = Annotated[Publisher, Depends(_publisher)]
"""Where accepted transcripts are announced (the Celery queue); services send only after their commit."""


# -- the caller ------------------------------------------------------------------------------------------


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
"""Who the audit history names for a write: `api/<token name>`."""


# -- units of work ---------------------------------------------------------------------------------------


def _min_lsn(
    x_hindsight_min_lsn: Annotated[
        str | None,
        Header(
            max_length=17,
            description="Read at least this WAL position (the X-Hindsight-LSN of the caller's last write), so the "
            "read sees that write even when reads go to a lagging replica.",
        ),
    ] = None,
) -> str | None:
    if x_hindsight_min_lsn is not None and not LSN_RE.match(x_hindsight_min_lsn):
        raise HTTPException(422, f"{MIN_LSN_HEADER} must be a WAL position such as 0/3020B60")
    return x_hindsight_min_lsn


def _read_session(state: StateDep, min_lsn: Annotated[str | None, Depends(_min_lsn)]) -> Iterator[ReadSession]:
    with state.reads.session(min_lsn) as session:
        yield session


def _write_session(state: StateDep) -> Iterator[Session]:
    with session_scope(state.engine) as session:
        yield session


ReadSessionDep = Annotated[ReadSession, Depends(_read_session, scope="function")]
"""A session to read with, rolled back when the route returns."""
WriteSessionDep = Annotated[Session, Depends(_write_session, scope="function")]
"""The route's unit of work: committed when it returns, before the response is sent; rolled back if it raises."""


UnitOfWork = Callable[[], AbstractContextManager[Session]]


def _unit_of_work(state: StateDep) -> UnitOfWork:
    return lambda: session_scope(state.engine)


UnitOfWorkDep = Annotated[UnitOfWork, Depends(_unit_of_work)]
"""Opens a unit of work the route closes itself, for answers known only after the commit (erase)."""


def _session_store(state: StateDep) -> SessionStore:
    return session_store(state.settings, redis_url=state.redis_url, publisher=state.publisher, engine=state.engine)


SessionStoreDep = Annotated[SessionStore, Depends(_session_store)]
"""Live sessions in Redis (working memory); their hand-over publishes through ingest."""

SessionIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")]
