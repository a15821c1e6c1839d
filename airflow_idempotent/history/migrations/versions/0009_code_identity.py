"""Code identity: which DAG version and bundle wrote each window.

Airflow 3 versions DAGs, and a rerun may run the latest version or the run's original one; a write
record now names the DAG version (Airflow's id and number) and the DAG bundle (name, version) it
ran under. Records written before this revision have none (NULL: unknown, not "unversioned").

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

COLUMNS = (
    ("dag_version_id", sa.String(36)),
    ("dag_version_number", sa.Integer()),
    ("bundle_name", sa.String(250)),
    ("bundle_version", sa.String(250)),
)


def upgrade() -> None:
    with op.batch_alter_table("idem_window_write") as batch:
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idem_window_write") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
