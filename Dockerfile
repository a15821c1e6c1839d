# The image every Airflow component of docker-compose.yaml runs: Apache Airflow 3.3.2 with
# airflow-idempotent installed from this directory (provider, listener plugin, backfill guard,
# CLI), so the scheduler, the API server and every worker load the same code.
#
#   docker build -t airflow-idempotent/airflow:3.3.2 .
#
# The package is baked in, never installed at start-up through _PIP_ADDITIONAL_REQUIREMENTS.
# tests/test_compose.py checks that this Airflow version is the one docker-compose.yaml names
# and satisfies pyproject.toml.
FROM apache/airflow:3.3.2

# .dockerignore lets in only pyproject.toml, README.md and airflow_idempotent/.
COPY --chown=airflow:0 pyproject.toml README.md LICENSE /opt/airflow-idempotent/
COPY --chown=airflow:0 airflow_idempotent/ /opt/airflow-idempotent/airflow_idempotent/

# The image sets AIRFLOW_VERSION; pinning it keeps pip from moving Airflow while it resolves
# this package's dependencies. The postgres extra: the history store and warehouse driver.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/airflow-idempotent[postgres]" \
    && airflow-idempotent --version \
    && python -c "import airflow_idempotent.plugins.listener, airflow_idempotent.operators"
