#!/usr/bin/env bash
# Create the databases that the connections `idempotent_history` and `warehouse` name (their
# names come from AIRFLOW_CONN_IDEMPOTENT_HISTORY and AIRFLOW_CONN_WAREHOUSE in
# deploy/cluster.env), and seed the example warehouse with the payouts scenario's sales.
#
# The postgres image runs it once, on an empty data directory (/docker-entrypoint-initdb.d).
# tests/e2e/test_celery_cluster.py runs it against the local server (PGHOST/PGPORT set).
# Safe to run again: existing databases and sales are left as they are.
set -euo pipefail

: "${POSTGRES_USER:?}" "${AIRFLOW_CONN_IDEMPOTENT_HISTORY:?}" "${AIRFLOW_CONN_WAREHOUSE:?}"

# The database of a connection URI: its path, without a query string.
database_of() {
    local uri=${1%%\?*}
    printf '%s' "${uri##*/}"
}

psql_as_owner() {
    psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --username "$POSTGRES_USER" "$@"
}

create_database() {
    local db=$1
    if [[ ! $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
        echo "refusing database name '$db': letters, digits and _ only" >&2
        return 1
    fi
    if [ "$(psql_as_owner --dbname postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" = 1 ]; then
        echo "database $db exists"
    else
        psql_as_owner --dbname postgres -c "CREATE DATABASE \"$db\" OWNER \"$POSTGRES_USER\""
        echo "database $db created"
    fi
}

history_db=$(database_of "$AIRFLOW_CONN_IDEMPOTENT_HISTORY")
warehouse_db=$(database_of "$AIRFLOW_CONN_WAREHOUSE")
create_database "$history_db"
create_database "$warehouse_db"

# The scenario (docs/contributing.md, The payouts scenario): 2,000 sales a day for 30 days from 2026-08-01.
# The history store's tables are created by its own migrations on first use, not here.
psql_as_owner --dbname "$warehouse_db" <<'SQL'
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS sales (
    sale_id   BIGINT PRIMARY KEY,
    sale_date DATE NOT NULL,
    price_eur DECIMAL(10,2) NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_sales_sale_date ON sales (sale_date);
INSERT INTO sales (sale_id, sale_date, price_eur)
SELECT i, DATE '2026-08-01' + ((i - 1) / 2000)::integer, round(25 + ((i * 37) % 900) * 0.5, 2)
FROM generate_series(1::bigint, 60000::bigint) AS t(i)
ON CONFLICT (sale_id) DO NOTHING;
SQL
echo "warehouse $warehouse_db: $(psql_as_owner --dbname "$warehouse_db" -tAc 'SELECT count(*) FROM sales') sales"
