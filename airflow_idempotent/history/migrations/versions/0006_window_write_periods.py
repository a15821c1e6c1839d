"""One write record per covered period: a write with lookback records each period it rewrote.

The natural key of a window write was the attempt (dag, run, task, map index, try); an attempt
with `lookback=N` now records N + 1 periods, so the period's start joins the key. A record
redelivered from the spool is still stored once.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ATTEMPT = ["dag_id", "run_id", "task_id", "map_index", "try_number"]


def upgrade() -> None:
    with op.batch_alter_table("idem_window_write") as batch:
        batch.drop_constraint("uq_idem_window_write", type_="unique")
        batch.create_unique_constraint("uq_idem_window_write", [*ATTEMPT, "window_start"])


def downgrade() -> None:
    with op.batch_alter_table("idem_window_write") as batch:
        batch.drop_constraint("uq_idem_window_write", type_="unique")
        batch.create_unique_constraint("uq_idem_window_write", ATTEMPT)
