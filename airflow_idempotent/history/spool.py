"""Never lose, never block: records the store could not take wait in a local spool file.

A task must succeed even when the history store is down or slow. Each record the store did not
accept within its bounded wait is appended (fsync'd) as one JSON line to a spool file under
AIRFLOW_HOME; the next successful write delivers every spooled record. Records carry natural
keys and the store inserts them only if absent, so a record delivered twice is stored once.
A record the store answers and refuses (a value it cannot hold) would be refused forever, so it is
parked in `rejected/` with the reason instead of blocking the records behind it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError

from airflow_idempotent.history.link import StoreLink
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
#: Characters of a parked record's id (a digest of its line: stable while other lines come and go).
REJECTED_ID_LENGTH = 12
#: The fields of a record that say which run, task and try it belongs to.
RECORD_SUMMARY_FIELDS = ("dag_id", "run_id", "task_id", "map_index", "try_number", "event", "target")


@dataclass(frozen=True)
class RejectedRecord:
    """One record the store refused, as parked in ``rejected/``: why, and what it was."""

    #: a digest of the parked line; what `requeue` and `drop` are given
    id: str
    #: the file it is parked in
    path: Path
    #: the store's refusal, ``ErrorType: first line``
    reason: str
    #: the record as the spool holds it (one JSON line)
    record: str

    @property
    def fields(self) -> dict[str, Any]:
        """The record's kind and the fields naming its run, task and try (empty when unreadable)."""
        try:
            data = json.loads(self.record)
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: data[k] for k in ("kind", *RECORD_SUMMARY_FIELDS) if data.get(k) is not None}

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "file": str(self.path),
            "reason": self.reason,
            **self.fields,
            "record": self.record,
        }


def _write_whole(path: Path, lines: list[str]) -> None:
    """Write `lines` to `path` through a temporary file and a rename: the file is whole or absent."""
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with temp.open("w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
        out.flush()
        os.fsync(out.fileno())
    temp.rename(path)


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

    def rejected_records(self) -> list[RejectedRecord]:
        """Every parked record with the reason it was refused, oldest file first."""
        folder = self.directory / REJECTED_DIR
        if not folder.exists():
            return []
        found: list[RejectedRecord] = []
        for path in sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name)):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    found.append(_parked(path, line))
        return found

    def requeue(self, ids: Collection[str]) -> list[RejectedRecord]:
        """Put the parked records `ids` back in the spool, to be delivered by the next successful
        write (or `deliver`). Written to the spool (fsync'd) before they leave ``rejected/``, so a
        crash in between costs at most a duplicate, which the store's natural keys absorb."""
        chosen = self._choose(ids)
        if chosen:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f"{socket.gethostname()}-{os.getpid()}-requeued-{uuid.uuid4().hex[:8]}.jsonl"
            _write_whole(self.directory / name, [r.record for r in chosen])
            self._remove(chosen)
            log.info("requeued %d rejected history record(s) into %s", len(chosen), self.directory)
        return chosen

    def drop(self, ids: Collection[str]) -> list[RejectedRecord]:
        """Delete the parked records `ids` for good (a human decided they are not worth keeping)."""
        chosen = self._choose(ids)
        self._remove(chosen)
        if chosen:
            log.warning("dropped %d rejected history record(s) from %s", len(chosen), self.directory)
        return chosen

    def _choose(self, ids: Collection[str]) -> list[RejectedRecord]:
        """The parked records with these ids; a KeyError naming any id that is not parked."""
        parked = self.rejected_records()
        known = {r.id for r in parked}
        unknown = sorted(set(ids) - known)
        if unknown:
            raise KeyError(f"no rejected record has the id {', '.join(unknown)}")
        return [r for r in parked if r.id in set(ids)]

    def _remove(self, records: list[RejectedRecord]) -> None:
        """Rewrite each rejected file without `records`' lines (whole or absent; empty files go)."""
        by_file: dict[Path, set[str]] = {}
        for r in records:
            by_file.setdefault(r.path, set()).add(r.id)
        for path, ids in by_file.items():
            # claimed by rename, as delivery claims a spool file: a process parking a record now
            # starts a new file under the old name instead of appending to the one rewritten here
            claimed = path.with_name(f"{path.name}.{uuid.uuid4().hex}.editing")
            try:
                path.rename(claimed)
            except FileNotFoundError:
                continue
            kept = [
                line
                for line in claimed.read_text(encoding="utf-8").splitlines()
                if line.strip() and _parked(path, line).id not in ids
            ]
            if kept:
                name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                _write_whole(path.with_name(name), kept)
            claimed.unlink()

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


def _parked(path: Path, line: str) -> RejectedRecord:
    """A line of a rejected file: ``{"rejected": reason, "record": line}`` (or, if unreadable, the
    line itself as the record)."""
    digest = hashlib.sha256(line.encode("utf-8")).hexdigest()[:REJECTED_ID_LENGTH]
    try:
        data = json.loads(line)
        reason, record = str(data["rejected"]), str(data["record"])
    except (ValueError, KeyError, TypeError):
        reason, record = "unreadable line in the rejected folder", line
    return RejectedRecord(id=digest, path=path, reason=reason, record=record)


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

    def record(self, record: Record, link: StoreLink | None = None) -> StoredWrite | None:
        """Store `record`, delivering the spool first; on any failure spool it and return None.
        `link`: the write's check before commit, whose connection the record is stored on
        (`StoreLink.record`); discarded if the record never took it."""
        try:
            self.spool.deliver(self.store)
            return self.store.record(record) if link is None else link.record(record)
        except Exception as err:
            if link is not None:  # the delivery failed before the store took its connection
                link.discard()
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
