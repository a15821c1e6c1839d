"""Fences: the newest attempt of a task instance that started writing a window.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_fence",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("fence_key", sa.String(64), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("target", sa.String(500), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("hostname", sa.String(250)),
        sa.Column("pid", sa.Integer),
        sa.Column("started_at", TS, nullable=False),
        sa.UniqueConstraint("fence_key", name="uq_idem_fence"),
    )


def downgrade() -> None:
    op.drop_table("idem_fence")
