"""Engine and unit-of-work helpers. Sessions are opened and committed only at the edges."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import NewType

import structlog
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session as _Session
from sqlalchemy.orm import sessionmaker

from hindsight.config import Settings, get_settings
from hindsight.errors import NoServer

log = structlog.get_logger(__name__)

ReadSession = NewType("ReadSession", _Session)
"""A session used only to read (never committed)."""
Session = NewType("Session", ReadSession)
"""A read-write unit of work (committed by `session_scope`); it can also be handed to whatever only reads."""


def resolve_database_url(settings: Settings | None = None) -> str:
    """The configured URL, or the URL of the embedded PostgreSQL already running in data_dir/pg.

    Starts nothing: the embedded server is started only where asked for (`hindsight.local_servers`)."""
    settings = settings or get_settings()
    if settings.database_url:
        return settings.database_url
    from hindsight.local_servers import running_postgres

    url = running_postgres(settings.data_dir / "pg")
    if url is None:
        raise NoServer(
            f"no database configured and no local stack running in {settings.data_dir}: "
            "run `hindsight up` or set HINDSIGHT_DATABASE_URL"
        )
    return url


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
    # pre_ping + recycle: a restarted PostgreSQL costs one failed checkout, not a crashed worker.
    return create_engine(url, pool_pre_ping=True, pool_recycle=1800, pool_size=5, max_overflow=5)


def get_engine(settings: Settings | None = None) -> Engine:
    """The process's engine for these settings' database (`resolve_database_url`: raises NoServer, starts
    nothing)."""
    return _engine_for(resolve_database_url(settings))


@lru_cache(maxsize=8)
def _factory(engine: Engine) -> sessionmaker[_Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


_AFTER_COMMIT = "hindsight.after_commit"


def after_commit(session: Session, callback: Callable[[], object]) -> None:
    """Run `callback` once this unit of work has committed (in the order registered); never if it rolls back.

    Services use it to send messages about rows only once those rows are durable (send after commit). Only a
    session from `session_scope` runs callbacks, so any other session is refused rather than silently
    dropping them. An exception from a callback reaches the caller of `session_scope`, after the commit."""
    callbacks = session.info.get(_AFTER_COMMIT)
    if callbacks is None:
        raise RuntimeError("after_commit needs a session from session_scope (no other session runs callbacks)")
    callbacks.append(callback)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on error; then the `after_commit` callbacks."""
    session = _factory(engine or get_engine())()
    callbacks: list[Callable[[], object]] = []
    session.info[_AFTER_COMMIT] = callbacks
    try:
        yield Session(ReadSession(session))
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.info.pop(_AFTER_COMMIT, None)
        session.close()
    for callback in callbacks:  # reached only after the commit: an exception above skips them
        callback()


@contextmanager
def read_session(engine: Engine | None = None) -> Iterator[ReadSession]:
    """A session to read with; rolled back at the end, so nothing it did is ever committed."""
    session = _factory(engine or get_engine())()
    try:
        yield ReadSession(session)
    finally:
        session.rollback()
        session.close()


# -- reads from a replica ----------------------------------------------------------------------------------

_PRIMARY = "hindsight.primary"
LSN_RE = re.compile(r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")
"""A PostgreSQL WAL position as `pg_current_wal_lsn()` prints it ("0/3020B60")."""


def lsn_value(lsn: str) -> int:
    """A WAL position as a number, to compare two of them."""
    high, low = lsn.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass(frozen=True)
class ReadRouter:
    """Where a read goes: the replica (`settings.database_read_url`) when there is one, it is up and it has
    replayed the caller's last write (`min_lsn`); else the primary. Without a replica every read goes to the
    primary and nothing is asked of it.

    A read that needs no particular write (`min_lsn` None) may see the replica's past, by as much as its
    replication lag; a caller that wrote sends the position its write answered with and sees that write."""

    primary: Engine
    replica: Engine | None = None

    @classmethod
    def for_settings(cls, settings: Settings, primary: Engine) -> ReadRouter:
        return cls(primary, _engine_for(settings.database_read_url) if settings.database_read_url else None)

    def write_position(self) -> str | None:
        """The primary's WAL position now, after the caller's commit; None without a replica (no read can lag)."""
        if self.replica is None:
            return None
        with self.primary.connect() as conn:
            return str(conn.execute(text("SELECT pg_current_wal_lsn()")).scalar_one())

    def engine_for(self, min_lsn: str | None = None) -> Engine:
        if self.replica is None:
            return self.primary
        try:
            with self.replica.connect() as conn:
                replayed = conn.execute(text("SELECT pg_last_wal_replay_lsn()")).scalar()
        except SQLAlchemyError as exc:
            log.warning("replica.unreachable", error=type(exc).__name__)
            return self.primary  # a replica that is down costs freshness nothing and availability nothing
        if replayed is None or min_lsn is None:
            return self.replica  # None: the server is no standby (promoted), so it holds every write it has
        return self.replica if lsn_value(str(replayed)) >= lsn_value(min_lsn) else self.primary

    @contextmanager
    def session(self, min_lsn: str | None = None) -> Iterator[ReadSession]:
        """A read session (`read_session`) on `engine_for(min_lsn)`; `primary_engine` finds the primary from it."""
        with read_session(self.engine_for(min_lsn)) as session:
            session.info[_PRIMARY] = self.primary
            yield session


FANOUT_CONNECTIONS = 4
"""Connections (per database, per process) for reads that run beside a request's own (`sibling_read_session`);
as many as the threads that run them (hindsight.services.context), so none waits for one."""


@lru_cache(maxsize=8)
def _sibling_engine(url: str) -> Engine:
    # A pool of its own, not the request's: a request that waits for a sibling never holds the connection
    # the sibling needs (with one pool, as many waiting requests as connections would wait for each other).
    return create_engine(
        url, pool_pre_ping=True, pool_recycle=1800, pool_size=FANOUT_CONNECTIONS, max_overflow=0, pool_timeout=1
    )


@contextmanager
def sibling_read_session(session: ReadSession) -> Iterator[ReadSession]:
    """A read session on the database `session` reads from, with a connection of its own (from a small pool
    kept for this), writing, like `session`, to the same primary: for a read that runs beside `session`'s, in
    another thread. Its snapshot is its own."""
    engine = session.get_bind().engine
    with read_session(_sibling_engine(engine.url.render_as_string(hide_password=False))) as sibling:
        sibling.info[_PRIMARY] = session.info.get(_PRIMARY, engine)
        yield sibling


def fans_out(session: ReadSession) -> bool:
    """Whether reads beside `session`'s may run in sibling sessions: it is bound to an engine (not to one
    connection, whose open transaction a sibling could not see) and holds no change of its own."""
    return isinstance(session.get_bind(), Engine) and not (session.new or session.dirty or session.deleted)


def primary_engine(session: ReadSession) -> Engine:
    """The engine that takes writes for this session's reads (its own unless it reads from a replica)."""
    primary = session.info.get(_PRIMARY)
    return primary if isinstance(primary, Engine) else session.get_bind().engine
