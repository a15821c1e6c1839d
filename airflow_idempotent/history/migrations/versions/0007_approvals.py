"""Approvals: a guarded window whose diff breached a threshold, waiting for a person's decision.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_approval",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("target", sa.String(500), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("window_label", sa.String(120), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("semantics", sa.String(32)),
        sa.Column("policy_version", sa.String(64)),
        sa.Column("stage_table", sa.String(250), nullable=False),
        sa.Column("stage_rows", sa.BigInteger, nullable=False),
        sa.Column("stage_checksum", sa.String(128), nullable=False),
        sa.Column("target_rows", sa.BigInteger, nullable=False),
        sa.Column("target_checksum", sa.String(128), nullable=False),
        sa.Column("diff", sa.Text, nullable=False),
        sa.Column("breaches", sa.Text, nullable=False),
        sa.Column("requested_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("decided_at", TS),
        sa.Column("decided_by", sa.String(250)),
        sa.Column("comment", sa.Text),
        sa.UniqueConstraint(
            "dag_id", "run_id", "task_id", "map_index", "try_number", name="uq_idem_approval"
        ),
    )
    op.create_index("ix_idem_approval_target", "idem_approval", ["target", "window_start", "window_end"])


def downgrade() -> None:
    op.drop_index("ix_idem_approval_target", "idem_approval")
    op.drop_table("idem_approval")
