"""Partition switch plans, for engines whose overwrite is a switch in the catalog (Spark).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_partition_switch",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("attempt_id", sa.String(64), nullable=False),
        sa.Column("target", sa.String(500), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("session_id", sa.String(64)),
        sa.Column("staging_table", sa.String(250), nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("operations", sa.Text),
        sa.Column("row_count", sa.BigInteger),
        sa.Column("checksum", sa.String(128)),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("attempt_id", name="uq_idem_partition_switch"),
    )
    op.create_index("ix_idem_partition_switch_target", "idem_partition_switch", ["target", "status"])


def downgrade() -> None:
    op.drop_index("ix_idem_partition_switch_target", "idem_partition_switch")
    op.drop_table("idem_partition_switch")
