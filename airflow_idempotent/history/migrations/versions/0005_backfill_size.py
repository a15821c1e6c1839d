"""Backfill sizes: how many windows a backfill run's backfill covers and approves.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_backfill_size",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("backfill_id", sa.Integer, nullable=False),
        sa.Column("windows", sa.Integer, nullable=False),
        sa.Column("approve_windows", sa.Integer),
        sa.Column("recorded_at", TS, nullable=False),
        sa.UniqueConstraint("dag_id", "run_id", "backfill_id", name="uq_idem_backfill_size"),
    )


def downgrade() -> None:
    op.drop_table("idem_backfill_size")
