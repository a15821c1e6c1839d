"""Kill switches: global, per DAG, per backfill.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_kill_switch",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("scope_key", sa.String(250), nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("set_by", sa.String(250)),
        sa.Column("set_at", TS),
        sa.Column("cleared_by", sa.String(250)),
        sa.Column("cleared_at", TS),
        sa.UniqueConstraint("scope", "scope_key", name="uq_idem_kill_switch"),
    )


def downgrade() -> None:
    op.drop_table("idem_kill_switch")
