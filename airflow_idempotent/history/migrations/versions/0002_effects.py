"""Effect ledger: one row per external effect identity, and its append-only event trail.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_effect",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("identity_key", sa.String(80), nullable=False),
        sa.Column("idempotency_key", sa.String(100), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("window_label", sa.String(120), nullable=False),
        sa.Column("effect_name", sa.String(250), nullable=False),
        sa.Column("business_key", sa.Text),
        sa.Column("identity", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("run_type", sa.String(32)),
        sa.Column("semantics", sa.String(32)),
        sa.Column("hostname", sa.String(250)),
        sa.Column("pid", sa.Integer),
        sa.Column("claimed_at", TS, nullable=False),
        sa.Column("finished_at", TS),
        sa.Column("reference", sa.Text),
        sa.Column("result", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("resolution", sa.Text),
        sa.Column("decision", sa.Text),
        sa.Column("resend_requested", sa.Boolean, nullable=False),
        sa.Column("previous", sa.Text),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("identity_key", name="uq_idem_effect"),
    )
    op.create_index("ix_idem_effect_idempotency_key", "idem_effect", ["idempotency_key"], unique=True)
    op.create_index("ix_idem_effect_window", "idem_effect", ["window_start", "window_end"])
    op.create_index("ix_idem_effect_dag", "idem_effect", ["dag_id", "task_id"])
    op.create_table(
        "idem_effect_event",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("identity_key", sa.String(80), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(250)),
        sa.Column("try_number", sa.Integer),
        sa.Column("hostname", sa.String(250)),
        sa.Column("pid", sa.Integer),
        sa.Column("actor", sa.String(250)),
        sa.Column("detail", sa.Text),
    )
    op.create_index("ix_idem_effect_event_identity", "idem_effect_event", ["identity_key", "id"])


def downgrade() -> None:
    op.drop_table("idem_effect_event")
    op.drop_table("idem_effect")
