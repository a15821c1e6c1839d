"""What the deployment decides for DAGs that leave it to it: the catchup default.

A DAG without ``catchup=`` catches up when the deployment's ``[scheduler] catchup_by_default`` is on
(Airflow 2's default; Airflow 3 turned it off). The linter reads it from the repository (an
``airflow.cfg``, or ``AIRFLOW__SCHEDULER__CATCHUP_BY_DEFAULT`` in a ``.env``, ``Dockerfile``, compose
or Helm values file) or from ``--catchup-default``; without either, an implicit catchup is not judged.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CatchupDefault", "repository_catchup"]

_ENV = re.compile(r"AIRFLOW__SCHEDULER__CATCHUP_BY_DEFAULT['\"]?\s*[:=]\s*['\"]?(\w+)", re.IGNORECASE)
_ENV_FILES = ("*.env", ".env*", "Dockerfile*", "docker-compose*.y*ml", "compose*.y*ml", "values*.y*ml")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class CatchupDefault:
    """The deployment's catchup default and where it was read (a file, or the command line)."""

    on: bool
    source: str


def _flag(text: str) -> bool | None:
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else None


def repository_catchup(repo: Path) -> CatchupDefault | None:
    """The catchup default a repository configures (top two folder levels), or None."""
    if not repo.is_dir():
        return None
    folders = [repo, *(p for p in sorted(repo.iterdir()) if p.is_dir() and not p.name.startswith("."))]
    for folder in folders:
        cfg = folder / "airflow.cfg"
        if cfg.is_file():
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            try:
                parser.read_string(cfg.read_text(errors="replace"))
            except configparser.Error:
                continue
            value = parser.get("scheduler", "catchup_by_default", fallback=None)
            if value is not None and (on := _flag(value)) is not None:
                return CatchupDefault(on, str(cfg))
        for pattern in _ENV_FILES:
            for path in sorted(folder.glob(pattern)):
                if not path.is_file() or path.stat().st_size > 1_000_000:
                    continue
                found = _ENV.search(path.read_text(errors="replace"))
                if found is not None and (on := _flag(found.group(1))) is not None:
                    return CatchupDefault(on, str(path))
    return None
