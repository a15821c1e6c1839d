"""Free TCP ports for the servers tests start, never handed to two processes at once.

The OS picks a port that is free when asked; between that answer and the server's own bind, another
process on the machine (another pytest-xdist worker starting its Airflow deployment or Spark
cluster) can be given the same port, and one of the two servers then fails to start. Each port
handed out here is also claimed by a file in a directory every process of this machine shares,
created exclusively, so a second claim of the same port within a claim's lifetime is refused and
another port is picked. A claim lives for the rest of its `HOLD_SECONDS` bucket and the next one
(10-20 minutes), long enough for any server to bind.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from pathlib import Path

__all__ = ["HOLD_SECONDS", "claim", "free_port"]

#: How long (at least) a handed-out port stays claimed.
HOLD_SECONDS = 600
#: Where the claims live (one empty file per port and bucket).
CLAIMS = Path(tempfile.gettempdir()) / "airflow-idempotent-ports"


def _os_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def claim(port: int, bucket: int | None = None) -> bool:
    """Claim `port` for this process unless a claim of this or the previous bucket holds it."""
    if bucket is None:
        CLAIMS.mkdir(parents=True, exist_ok=True)
        bucket = int(time.time() // HOLD_SECONDS)
    if (CLAIMS / f"{port}.{bucket - 1}").exists():
        return False
    try:
        os.close(os.open(CLAIMS / f"{port}.{bucket}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def _sweep(bucket: int) -> None:
    """Forget claims older than the previous bucket (best effort: another process may race us)."""
    for path in CLAIMS.iterdir():
        with contextlib.suppress(ValueError, OSError):
            if int(path.suffix.lstrip(".")) < bucket - 1:
                path.unlink()


def free_port(attempts: int = 50) -> int:
    """A TCP port free on 127.0.0.1 now and claimed by no other process of this machine."""
    CLAIMS.mkdir(parents=True, exist_ok=True)
    bucket = int(time.time() // HOLD_SECONDS)
    _sweep(bucket)
    for _ in range(attempts):
        port = _os_port()
        if claim(port, bucket):
            return port
    raise RuntimeError(
        f"no free TCP port on 127.0.0.1 after {attempts} tries: every port the OS offered is claimed in "
        f"{CLAIMS}; stop the servers left running, or remove that directory if none is"
    )
