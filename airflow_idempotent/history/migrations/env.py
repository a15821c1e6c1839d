"""Alembic environment for the history store: run on a connection handed in by HistoryStore."""

from __future__ import annotations

from alembic import context

from airflow_idempotent.history.models import VERSION_TABLE, Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
