"""Never lose, never block: records the store could not take wait in a local spool file.

A task must succeed even when the history store is down or slow. Each record the store did not
accept within its bounded wait is appended (fsync'd) as one JSON line to a spool file under
AIRFLOW_HOME; the next successful write delivers every spooled record. Records carry natural
keys and the store inserts them only if absent, so a record delivered twice is stored once.
A record the store answers and refuses (a value it cannot hold) would be refused forever, so it is
parked in `rejected/` with the reason instead of blocking the records behind it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from pathlib import Path

from sqlalchemy.exc import DataError, IntegrityError

from airflow_idempotent.history.store import (
    DEFAULT_CONN_ID,
    DEFAULT_TIMEOUT,
    HistoryStore,
    Record,
    StoredWrite,
    airflow_home,
)

log = logging.getLogger(__name__)

SPOOL_DIR = "idempotent_spool"
REJECTED_DIR = "rejected"


class Spool:
    """A folder of JSON-lines files, one per writing process, claimed by rename when delivered."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or airflow_home() / SPOOL_DIR

    def append(self, record: Record) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{socket.gethostname()}-{os.getpid()}.jsonl"
        with path.open("a", encoding="utf-8") as out:
            out.write(record.to_json() + "\n")
            out.flush()
            os.fsync(out.fileno())
        return path

    def pending(self) -> list[Path]:
        if not self.directory.exists():
            return []
        return sorted(self.directory.glob("*.jsonl"))

    def count(self) -> int:
        return sum(1 for path in self.pending() for line in path.read_text().splitlines() if line.strip())

    def deliver(self, store: HistoryStore) -> int:
        """Hand every spooled record to the store. A record the store refuses (see `refused`) goes
        to the rejected folder and delivery goes on; if the store is unavailable, the records not yet
        stored go back to the spool under a fresh name and the error is raised."""
        delivered = 0
        for path in self.pending():
            claimed = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.delivering")
            try:
                path.rename(claimed)  # atomic: two deliverers never take the same file
            except FileNotFoundError:
                continue
            lines = [line for line in claimed.read_text(encoding="utf-8").splitlines() if line.strip()]
            for index, line in enumerate(lines):
                try:
                    store.record(Record.from_json(line))
                except Exception as err:
                    if not refused(err):
                        self._put_back(lines[index:])
                        claimed.unlink()
                        raise
                    self.reject(line, err)
                    continue
                delivered += 1
            claimed.unlink()
        if delivered:
            log.info("delivered %d spooled history record(s) from %s", delivered, self.directory)
        return delivered

    def reject(self, line: str, err: BaseException) -> Path:
        """Park a record the store will never take, with the reason, so it stops no other record."""
        folder = self.directory / REJECTED_DIR
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{socket.gethostname()}-{os.getpid()}.jsonl"
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:500] if str(err) else ''}"
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"rejected": reason, "record": line}) + "\n")
            out.flush()
            os.fsync(out.fileno())
        log.error(
            "history store refused a spooled record (%s); it is kept in %s, and the records after it are "
            "delivered. Fix the cause, then move the line's record back into %s to deliver it again.",
            reason,
            path,
            self.directory,
        )
        return path

    def rejected(self) -> int:
        """How many records wait in the rejected folder."""
        folder = self.directory / REJECTED_DIR
        if not folder.exists():
            return 0
        return sum(1 for p in folder.glob("*.jsonl") for line in p.read_text().splitlines() if line.strip())

    def _put_back(self, lines: list[str]) -> None:
        """Write undelivered lines to a new spool file (temp then rename: whole or absent). The name
        is made afresh, never derived from the old one, so it does not grow with each failure."""
        name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        temp = self.directory / f"{name}.tmp"
        with temp.open("w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())
        temp.rename(self.directory / f"{name}.jsonl")


def refused(err: BaseException) -> bool:
    """True when the store answered and refused this record (a value it cannot hold, a broken spool
    line), as opposed to being unreachable or slow: a refused record would be refused again."""
    return isinstance(err, DataError | IntegrityError | ValueError | TypeError | KeyError)


class SafeHistory:
    """The store as tasks and listeners use it: bounded waits, failures spooled, never raised."""

    def __init__(
        self, conn_id: str = DEFAULT_CONN_ID, timeout: float = DEFAULT_TIMEOUT, spool: Spool | None = None
    ) -> None:
        self.conn_id = conn_id
        self.timeout = timeout
        self.spool = spool or Spool()
        self._store: HistoryStore | None = None

    @property
    def store(self) -> HistoryStore:
        if self._store is None:
            self._store = HistoryStore.from_airflow(self.conn_id, self.timeout)
        return self._store

    def record(self, record: Record) -> StoredWrite | None:
        """Store `record`, delivering the spool first; on any failure spool it and return None."""
        try:
            self.spool.deliver(self.store)
            return self.store.record(record)
        except Exception as err:
            if refused(err):  # spooling it would only block the records after it
                self.spool.reject(record.to_json(), err)
                return None
            path = self.spool.append(record)
            log.warning(
                "history store %r unavailable (%s: %s): %s record spooled to %s, delivered on the next "
                "successful write",
                self.conn_id,
                type(err).__name__,
                str(err).splitlines()[0][:200] if str(err) else "",
                record.kind,
                path,
            )
            return None

    def last_write(self, *args: object, **kwargs: object) -> dict[str, object] | None:
        """The latest write of a window, or None when the store cannot answer in time."""
        try:
            return self.store.last_write(*args, **kwargs)  # type: ignore[arg-type]
        except Exception as err:
            log.warning("history store %r unavailable (%s): no skip decision possible", self.conn_id, err)
            return None
