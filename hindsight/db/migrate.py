"""Run Alembic migrations programmatically (used by `hindsight migrate`, the local stack and tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations


def alembic_config(url: str, *, embedding_dim: int | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.attributes["url"] = url
    if embedding_dim is not None:
        cfg.attributes["embedding_dim"] = embedding_dim
    return cfg


def upgrade(url: str, revision: str = "head", *, embedding_dim: int | None = None) -> None:
    command.upgrade(alembic_config(url, embedding_dim=embedding_dim), revision)


def downgrade(url: str, revision: str = "base", *, embedding_dim: int | None = None) -> None:
    command.downgrade(alembic_config(url, embedding_dim=embedding_dim), revision)
