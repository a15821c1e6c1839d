"""Scratch directories for the benchmarks, removed when the benchmark exits.

A 1,000,000-row Delta or Iceberg bench leaves 180-310 MB of table files behind; left in the temp
folder run after run, they helped fill this machine's disk, so every bench takes its directory here.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_dir(prefix: str) -> Path:
    """A new temporary directory, removed with its contents at the interpreter's exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path
