"""Errors raised before anything is written: each names the cause and the fix."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException, AirflowFailException


class IdempotentError(AirflowFailException):
    """Base class. A fail (not retry) exception: retrying bad input cannot help."""


class WindowError(IdempotentError):
    """The run's window is missing, empty or cannot be derived."""


class NonDeterministicSQLError(IdempotentError):
    """The SQL reads the clock or randomness, so a rerun would not reproduce the first run."""


class InvalidIdentifierError(IdempotentError):
    """A table or column name is not a plain identifier (it may carry SQL)."""


class SchemaError(IdempotentError):
    """An unknown table or column, or a column of the wrong type."""


class RowsOutsideWindowError(IdempotentError):
    """The SELECT produced rows whose partition value lies outside the run's window."""


class MergeKeyError(IdempotentError):
    """The merge source has duplicate or NULL keys."""


class UnsupportedConnectionError(IdempotentError):
    """The connection's type has no adapter."""


class LockTimeoutError(AirflowException):
    """Another attempt held the (table, window) lock past the timeout.

    A plain AirflowException, not a fail: a later retry may find the lock free.
    """


class SqlParseError(IdempotentError):
    """The SQL could not be parsed in the connection's dialect, so it cannot be checked."""


class FencedError(IdempotentError):
    """A newer attempt of the same task instance started writing the window: this one writes nothing.

    A fail (not retry) exception: a retry would be older than the attempt that fenced it too.
    """
