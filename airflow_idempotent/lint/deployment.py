"""What the deployment decides for DAGs that leave it to it: the catchup default, data intervals.

A DAG without ``catchup=`` catches up when the deployment's ``[scheduler] catchup_by_default`` is on
(Airflow 2's default; Airflow 3 turned it off). A cron (or timedelta) ``schedule=`` gives runs with a
data interval only when ``[scheduler] create_cron_data_intervals`` (``create_delta_data_intervals``)
is on; Airflow 3's default is off: the run's data interval is one point in time. The linter reads
them from the repository (an ``airflow.cfg``, or ``AIRFLOW__SCHEDULER__<KEY>`` in a ``.env``,
``Dockerfile``, compose or Helm values file); the catchup default also from ``--catchup-default``.
Without either, an implicit catchup is not judged and the data intervals are Airflow 3's default.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CatchupDefault", "DataIntervals", "repository_catchup", "repository_data_intervals"]

_ENV_FILES = ("*.env", ".env*", "Dockerfile*", "docker-compose*.y*ml", "compose*.y*ml", "values*.y*ml")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class CatchupDefault:
    """The deployment's catchup default and where it was read (a file, or the command line)."""

    on: bool
    source: str


@dataclass(frozen=True)
class DataIntervals:
    """Whether cron and timedelta schedules give runs a data interval with width (Airflow 3: no)."""

    cron: bool = False
    delta: bool = False


def _flag(text: str) -> bool | None:
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else None


def _setting(repo: Path, key: str) -> tuple[bool, str] | None:
    """The ``[scheduler] key`` flag a repository configures (top two folder levels) and where."""
    if not repo.is_dir():
        return None
    env = re.compile(rf"AIRFLOW__SCHEDULER__{key.upper()}['\"]?\s*[:=]\s*['\"]?(\w+)", re.IGNORECASE)
    folders = [repo, *(p for p in sorted(repo.iterdir()) if p.is_dir() and not p.name.startswith("."))]
    for folder in folders:
        cfg = folder / "airflow.cfg"
        if cfg.is_file():
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            try:
                parser.read_string(cfg.read_text(errors="replace"))
            except configparser.Error:
                continue
            value = parser.get("scheduler", key, fallback=None)
            if value is not None and (on := _flag(value)) is not None:
                return on, str(cfg)
        for pattern in _ENV_FILES:
            for path in sorted(folder.glob(pattern)):
                if not path.is_file() or path.stat().st_size > 1_000_000:
                    continue
                found = env.search(path.read_text(errors="replace"))
                if found is not None and (on := _flag(found.group(1))) is not None:
                    return on, str(path)
    return None


def repository_catchup(repo: Path) -> CatchupDefault | None:
    """The catchup default a repository configures (top two folder levels), or None."""
    found = _setting(repo, "catchup_by_default")
    return CatchupDefault(*found) if found is not None else None


def repository_data_intervals(repo: Path) -> DataIntervals:
    """Whether the repository's deployment gives cron / timedelta schedules data intervals."""
    cron = _setting(repo, "create_cron_data_intervals")
    delta = _setting(repo, "create_delta_data_intervals")
    return DataIntervals(cron=bool(cron and cron[0]), delta=bool(delta and delta[0]))
