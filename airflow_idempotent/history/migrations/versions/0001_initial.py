"""History store: DAG run events, task attempts, window writes.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "idem_dag_run_event",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("state", sa.String(32)),
        sa.Column("run_type", sa.String(32)),
        sa.Column("logical_date", TS),
        sa.Column("data_interval_start", TS),
        sa.Column("data_interval_end", TS),
        sa.Column("semantics", sa.String(32)),
        sa.Column("policy_version", sa.String(64)),
        sa.Column("source", sa.String(32)),
        sa.Column("message", sa.Text),
        sa.UniqueConstraint("dag_id", "run_id", "event", "at", name="uq_idem_dag_run_event"),
    )
    op.create_index("ix_idem_dag_run_event_dag_id", "idem_dag_run_event", ["dag_id"])
    op.create_table(
        "idem_task_attempt",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=False),
        sa.Column("map_index", sa.Integer, nullable=False),
        sa.Column("try_number", sa.Integer, nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("state", sa.String(32)),
        sa.Column("previous_state", sa.String(32)),
        sa.Column("run_type", sa.String(32)),
        sa.Column("logical_date", TS),
        sa.Column("hostname", sa.String(250)),
        sa.Column("source", sa.String(32)),
        sa.Column("error", sa.Text),
        sa.UniqueConstraint(
            "dag_id", "run_id", "task_id", "map_index", "try_number", "event", name="uq_idem_task_attempt"
        ),
    )
    op.create_index("ix_idem_task_attempt_dag_task", "idem_task_attempt", ["dag_id", "task_id"])
    op.create_table(
        "idem_window_write",
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
        sa.Column("strategy", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("rows_deleted", sa.BigInteger),
        sa.Column("rows_inserted", sa.BigInteger),
        sa.Column("rows_updated", sa.BigInteger),
        sa.Column("source_rows", sa.BigInteger),
        sa.Column("row_count", sa.BigInteger),
        sa.Column("checksum", sa.String(128)),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("fingerprint_parts", sa.Text),
        sa.Column("run_type", sa.String(32)),
        sa.Column("semantics", sa.String(32)),
        sa.Column("policy_version", sa.String(64)),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("dataset_version", sa.Integer, nullable=False),
        sa.Column("nondeterministic", sa.Boolean, nullable=False),
        sa.Column("diff", sa.Text),
        sa.Column("message", sa.Text),
        sa.Column("written_at", TS, nullable=False),
        sa.Column("package_version", sa.String(32), nullable=False),
        sa.UniqueConstraint(
            "dag_id", "run_id", "task_id", "map_index", "try_number", name="uq_idem_window_write"
        ),
    )
    op.create_index(
        "ix_idem_window_write_target", "idem_window_write", ["target", "window_start", "window_end"]
    )
    op.create_index("ix_idem_window_write_dag", "idem_window_write", ["dag_id", "task_id"])


def downgrade() -> None:
    op.drop_table("idem_window_write")
    op.drop_table("idem_task_attempt")
    op.drop_table("idem_dag_run_event")
