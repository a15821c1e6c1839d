"""Read the cluster's settings (deploy/cluster.env) and move them to other addresses.

docker-compose.yaml hands `cluster.env` to every Airflow component. The end-to-end test
(tests/e2e/test_celery_cluster.py) starts the same components as local processes from the same
file: `relocate` rewrites only the addresses in it (compose service name -> local host and port,
database name -> a fresh one, credentials -> the local PostgreSQL user, Redis database number),
so whatever else the file says (executor, connections, broker, result backend) is what the test
proves. tests/test_compose.py checks the compose file against the same file.

Standard library only: the tests import it without the package being installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

DEPLOY_DIR = Path(__file__).resolve().parent
CLUSTER_ENV = DEPLOY_DIR / "cluster.env"

_LINE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)")


def read_env(path: Path = CLUSTER_ENV) -> dict[str, str]:
    """The KEY=VALUE lines of an env file, in order; comments and blank lines skipped.

    Only the subset that compose and this reader agree on is accepted: no quotes, no `$`
    (compose would interpolate it), no spaces around `=`, every key once.
    """
    settings: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        where = f"{path.name}:{number}"
        if match is None:
            raise ValueError(f"{where}: expected KEY=VALUE, got {raw!r}")
        key, value = match["key"], match["value"]
        if value != value.strip() or any(c in value for c in "\"'$"):
            raise ValueError(f"{where}: {key}: no quotes, `$` or surrounding spaces in values")
        if key in settings:
            raise ValueError(f"{where}: {key} is set twice")
        settings[key] = value
    return settings


def database_name(url: str) -> str:
    """The database a PostgreSQL URL or Airflow connection URI names (its path, no query)."""
    return urlsplit(url).path.lstrip("/")


def relocate(
    settings: Mapping[str, str],
    addresses: Mapping[str, str],
    databases: Mapping[str, str] | None = None,
    postgres_userinfo: str | None = None,
    redis_db: int | None = None,
) -> dict[str, str]:
    """The same settings with every URL pointed elsewhere; every other value unchanged.

    addresses: "host:port" as written in the file -> "host:port" to use instead. Every URL's
    address must be listed: a setting that would still point into the compose network fails here.
    databases: PostgreSQL database name -> the one to use (every one used must be listed).
    postgres_userinfo: "user" or "user:password" for PostgreSQL URLs.
    redis_db: the Redis database number for redis:// URLs.
    """
    databases = databases or {}
    moved: dict[str, str] = {}
    for key, value in settings.items():
        parts = urlsplit(value)
        if not parts.scheme or not parts.netloc:
            moved[key] = value
            continue
        userinfo, _, hostport = parts.netloc.rpartition("@")
        if hostport not in addresses:
            raise ValueError(f"{key}: no address given for {hostport} (in {value})")
        path = parts.path
        if "postgres" in parts.scheme:
            name = database_name(value)
            if name not in databases:
                raise ValueError(f"{key}: no database given for {name!r} (in {value})")
            path = "/" + databases[name]
            if postgres_userinfo is not None:
                userinfo = postgres_userinfo
        elif parts.scheme.startswith("redis") and redis_db is not None:
            path = f"/{int(redis_db)}"
        netloc = f"{userinfo}@{addresses[hostport]}" if userinfo else addresses[hostport]
        moved[key] = urlunsplit(parts._replace(netloc=netloc, path=path))
    return moved
