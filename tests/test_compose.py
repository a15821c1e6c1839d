"""docker-compose.yaml, Dockerfile and deploy/ agree with each other and with the package.

No Docker needed: the compose file is parsed with PyYAML (merge keys `<<` resolved) and compared
with deploy/cluster.env, the settings file it hands every Airflow component and that
tests/e2e/test_celery_cluster.py runs as local processes; the Dockerfile's base image with
docker-compose.yaml's image and pyproject.toml's Airflow requirement.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from deploy.settings import CLUSTER_ENV, database_name, read_env, relocate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
INIT_DIR = REPO / "deploy" / "postgres-init"

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
    "airflow-init": None,
}
SERVICES = {*AIRFLOW_SERVICES, "postgres", "redis"}
CLUSTER_ENV_REF = "deploy/cluster.env"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


@pytest.fixture(scope="module")
def settings() -> dict[str, str]:
    return read_env(CLUSTER_ENV)


def dockerfile_airflow_version() -> Version:
    froms = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert len(froms) == 1, froms
    match = re.fullmatch(r"apache/airflow:(\d+\.\d+\.\d+)", froms[0])
    assert match, f"the Dockerfile must build FROM apache/airflow:X.Y.Z, not {froms[0]}"
    return Version(match[1])


def pyproject_airflow_requirement() -> Requirement:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (req,) = [Requirement(d) for d in project["dependencies"] if Requirement(d).name == "apache-airflow"]
    return req


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # ["KEY=VALUE", ...]
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def env_files(service: dict[str, Any]) -> list[str]:
    files = service.get("env_file") or []
    files = [files] if isinstance(files, (str, dict)) else files
    return [f["path"] if isinstance(f, dict) else f for f in files]


def command(service: dict[str, Any]) -> str:
    cmd = service.get("command")
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


# --------------------------------------------------------------------------------------------
# The image.
# --------------------------------------------------------------------------------------------


def test_the_image_is_the_dockerfiles_airflow_and_satisfies_pyproject(services: dict[str, Any]) -> None:
    version = dockerfile_airflow_version()
    requirement = pyproject_airflow_requirement()
    assert requirement.specifier.contains(version), (str(requirement), version)
    assert all(version >= Version(s.version) for s in requirement.specifier if s.operator == ">=")
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert service["build"] == ".", name
        image = re.fullmatch(r"\$\{AIRFLOW_IMAGE_NAME:-([^}]+)\}", service["image"])
        assert image, (name, service["image"])
        assert image[1].rsplit(":", 1)[1] == str(version), (name, image[1])


def test_the_dockerfile_bakes_the_package_in_with_its_postgres_extra() -> None:
    text = DOCKERFILE.read_text()
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in re.sub(r"#.*", "", text)
    copies = re.findall(r"^COPY\s+(.+)$", text, flags=re.MULTILINE)
    copied = {src for line in copies for src in shlex.split(line)[:-1] if not src.startswith("--")}
    assert {"pyproject.toml", "README.md", "airflow_idempotent/"} <= copied, copied
    run = " ".join(re.findall(r"^RUN\s+(.+(?:\\\n.+)*)", text, flags=re.MULTILINE))
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in run  # Airflow stays the base image's
    assert '"/opt/airflow-idempotent[postgres]"' in run


def test_dockerignore_lets_in_what_the_image_installs() -> None:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!airflow_idempotent/"} <= set(rules)


def test_no_service_installs_packages_at_start(compose: dict[str, Any]) -> None:
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in COMPOSE_FILE.read_text()


# --------------------------------------------------------------------------------------------
# Services and their settings.
# --------------------------------------------------------------------------------------------


def test_the_services_are_airflows_cluster(services: dict[str, Any]) -> None:
    assert set(services) == SERVICES
    for name, expected in AIRFLOW_SERVICES.items():
        if expected is not None:
            assert command(services[name]) == expected, name
            assert "healthcheck" in services[name], name
            depends = services[name]["depends_on"]
            assert depends["airflow-init"] == {"condition": "service_completed_successfully"}, name
            assert depends["postgres"] == depends["redis"] == {"condition": "service_healthy"}, name
    assert services["airflow-worker"]["depends_on"]["airflow-apiserver"] == {"condition": "service_healthy"}
    init_env = environment(services["airflow-init"])
    assert init_env["_AIRFLOW_DB_MIGRATE"] == "true"
    assert "airflow providers get airflow-idempotent" in command(services["airflow-init"])
    assert services["airflow-apiserver"]["ports"] == ["8080:8080"]


def test_every_airflow_component_reads_the_cluster_settings(
    services: dict[str, Any], settings: dict[str, str]
) -> None:
    for name in AIRFLOW_SERVICES:
        service = services[name]
        assert env_files(service) == [CLUSTER_ENV_REF], name
        overlap = set(environment(service)) & set(settings)
        assert not overlap, f"{name} repeats {sorted(overlap)} of {CLUSTER_ENV_REF}: set them there only"
        assert "AIRFLOW__CORE__DAGS_FOLDER" not in environment(service)
    assert (REPO / CLUSTER_ENV_REF) == CLUSTER_ENV


def test_executor_broker_and_result_backend(settings: dict[str, str], services: dict[str, Any]) -> None:
    assert settings["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    broker = urlsplit(settings["AIRFLOW__CELERY__BROKER_URL"])
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
    assert re.fullmatch(r"/\d+", broker.path), broker.path
    metadata = urlsplit(settings["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    backend = urlsplit(settings["AIRFLOW__CELERY__RESULT_BACKEND"])
    assert metadata.scheme == "postgresql+psycopg2"
    assert backend.scheme == "db+postgresql"
    postgres = environment(services["postgres"])
    for url in (metadata, backend):
        assert (url.hostname, url.port) == ("postgres", 5432)
        assert (url.username, url.password) == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])
        assert url.path == f"/{postgres['POSTGRES_DB']}"  # Airflow's own database, as in Airflow's compose
    api = urlsplit(settings["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert (api.hostname, api.port, api.path) == ("airflow-apiserver", 8080, "/execution/")
    assert settings["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"


def test_connections_warehouse_and_history(settings: dict[str, str], services: dict[str, Any]) -> None:
    postgres = environment(services["postgres"])
    names = {}
    for conn_id in ("WAREHOUSE", "IDEMPOTENT_HISTORY"):
        uri = settings[f"AIRFLOW_CONN_{conn_id}"]
        url = urlsplit(uri)
        assert url.scheme == "postgresql", uri  # Airflow's conn_type postgres
        assert (url.hostname, url.port) == ("postgres", 5432), uri
        assert (url.username, url.password) == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])
        names[conn_id] = database_name(uri)
    assert names == {"WAREHOUSE": "warehouse", "IDEMPOTENT_HISTORY": "idempotent_history"}
    # Three databases on one server: metadata, history and warehouse are never the same.
    assert len({*names.values(), postgres["POSTGRES_DB"]}) == 3


def test_postgres_creates_the_databases_the_connections_name(services: dict[str, Any]) -> None:
    postgres = services["postgres"]
    assert env_files(postgres) == [CLUSTER_ENV_REF]  # the init script reads the connections
    assert "./deploy/postgres-init:/docker-entrypoint-initdb.d:ro" in postgres["volumes"]
    scripts = sorted(INIT_DIR.iterdir())
    assert [s.name for s in scripts] == ["10-idempotent-databases.sh"]
    script = scripts[0]
    assert script.stat().st_mode & 0o111, f"{script} must be executable (else the image sources it)"
    text = script.read_text()
    for variable in ("AIRFLOW_CONN_IDEMPOTENT_HISTORY", "AIRFLOW_CONN_WAREHOUSE", "POSTGRES_USER"):
        assert f"${variable}" in text or f"${{{variable}" in text, variable


def test_the_dags_folder_is_mounted(services: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        assert "./dags:/opt/airflow/dags:ro" in services[name]["volumes"], name
    assert (REPO / "dags" / "payouts.py").is_file()


def test_every_address_is_a_compose_service(settings: dict[str, str], services: dict[str, Any]) -> None:
    """What the e2e test relocates: every URL points at a service of this file, on an explicit port."""
    addresses = set()
    for key, value in settings.items():
        url = urlsplit(value)
        if url.scheme and url.netloc:
            assert url.hostname in services, (key, value)
            assert url.port is not None, f"{key}: write the port, the e2e test relocates host:port"
            addresses.add(f"{url.hostname}:{url.port}")
    assert addresses == {"postgres:5432", "redis:6379", "airflow-apiserver:8080"}
    local = relocate(
        settings,
        addresses={
            "postgres:5432": "127.0.0.1:1001",
            "redis:6379": "127.0.0.1:1002",
            "airflow-apiserver:8080": "127.0.0.1:1003",
        },
        databases={"airflow": "m", "warehouse": "w", "idempotent_history": "h"},
        postgres_userinfo="postgres",
        redis_db=7,
    )
    assert set(local) == set(settings)
    for key, value in local.items():
        if "://" in value:
            assert urlsplit(value).hostname == "127.0.0.1", (key, value)
        else:
            assert value == settings[key]
    assert local["AIRFLOW_CONN_WAREHOUSE"] == "postgresql://postgres@127.0.0.1:1001/w"
    assert local["AIRFLOW__CELERY__BROKER_URL"] == "redis://127.0.0.1:1002/7"


# --------------------------------------------------------------------------------------------
# The settings file's reader.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('A="quoted"', "no quotes"),
        ("A=${HOME}", "no quotes, `$`"),
        ("A = b", "expected KEY=VALUE"),
        ("A=b\nA=c", "set twice"),
        ("export A=b", "expected KEY=VALUE"),
    ],
)
def test_read_env_refuses_what_compose_would_read_differently(tmp_path: Path, line: str, error: str) -> None:
    path = tmp_path / "x.env"
    path.write_text(f"# comment\n\n{line}\n")
    with pytest.raises(ValueError, match=re.escape(error)):
        read_env(path)


def test_relocate_refuses_an_address_it_was_not_given() -> None:
    with pytest.raises(ValueError, match="no address given for postgres:5432"):
        relocate({"A": "postgresql://u@postgres:5432/db"}, addresses={})
    with pytest.raises(ValueError, match="no database given for 'db'"):
        relocate({"A": "postgresql://u@postgres:5432/db"}, addresses={"postgres:5432": "127.0.0.1:5432"})
