"""Engine and unit-of-work helpers. Sessions are opened and committed only at the edges."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import NewType

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session as _Session
from sqlalchemy.orm import sessionmaker

from hindsight.config import Settings, get_settings

ReadSession = NewType("ReadSession", _Session)
"""A session used only to read (never committed)."""
Session = NewType("Session", ReadSession)
"""A read-write unit of work (committed by `session_scope`); it can also be handed to whatever only reads."""


def resolve_database_url(settings: Settings | None = None) -> str:
    """The configured URL, or the embedded PostgreSQL's (started on first use) when none is set."""
    settings = settings or get_settings()
    if settings.database_url:
        return settings.database_url
    from hindsight.embedded import start_postgres

    return start_postgres(settings.data_dir / "pg")


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
    # pre_ping + recycle: a restarted PostgreSQL costs one failed checkout, not a crashed worker.
    return create_engine(url, pool_pre_ping=True, pool_recycle=1800, pool_size=5, max_overflow=5)


def get_engine(settings: Settings | None = None) -> Engine:
    return _engine_for(resolve_database_url(settings))


@lru_cache(maxsize=8)
def _factory(engine: Engine) -> sessionmaker[_Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on error."""
    session = _factory(engine or get_engine())()
    try:
        yield Session(ReadSession(session))
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def read_session(engine: Engine | None = None) -> Iterator[ReadSession]:
    session = _factory(engine or get_engine())()
    try:
        yield ReadSession(session)
    finally:
        session.rollback()
        session.close()
