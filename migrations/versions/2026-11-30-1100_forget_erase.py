"""Soft forget (a `forgotten` state) and erase tombstones.

A forgotten memory keeps its row (for audit and unforget) but leaves every read path that filters by
state: recall, lifecycle and reconcile only look at active/stale/quarantined memories. An erased memory
leaves only a tombstone: its id, namespace, when, by whom and the scope of the erase, never content.

Revision ID: 0003_forget_erase
Revises: 0001_initial
Create Date: 2026-11-30 11:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0003_forget_erase"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_STATES = "'active', 'stale', 'archived', 'quarantined'"
_NEW_STATES = _OLD_STATES + ", 'forgotten'"


def _state_check(states: str) -> None:
    # The initial revision's check is named by the metadata naming convention (ck_memories_state_valid).
    op.execute("ALTER TABLE memories DROP CONSTRAINT IF EXISTS ck_memories_state_valid")
    op.execute("ALTER TABLE memories DROP CONSTRAINT IF EXISTS state_valid")
    op.execute(f"ALTER TABLE memories ADD CONSTRAINT ck_memories_state_valid CHECK (state IN ({states}))")


def upgrade() -> None:
    _state_check(_NEW_STATES)
    op.create_table(
        "memory_tombstones",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("memory_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("namespace", sa.String(128), nullable=False),
        sa.Column("erase_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ix_memory_tombstones_memory_id", "memory_tombstones", ["memory_id"])
    op.create_index("ix_memory_tombstones_namespace", "memory_tombstones", ["namespace"])


def downgrade() -> None:
    op.drop_table("memory_tombstones")
    # No `forgotten` state before this revision: a forgotten memory goes back to being archived.
    op.execute("UPDATE memories SET state = 'archived' WHERE state = 'forgotten'")
    _state_check(_OLD_STATES)
