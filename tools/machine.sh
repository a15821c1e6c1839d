#!/usr/bin/env bash
# Make this machine ready for `make test`: the Debian packages the suite drives and the local
# services its tests use, configured as the suite expects:
#   PostgreSQL  127.0.0.1:5432, trust authentication over local TCP, databases test, postgres, root
#   MariaDB     127.0.0.1:3306, root with an empty password over TCP, database test
#   Redis       127.0.0.1:6379, nothing kept on disk
#   Java 17+ (the Spark cluster), Maven (Spark's extra jars), Chromium (the UI's browser test)
# Called by `make test`, `make machine` and .ci/run. Idempotent: it only acts on what is missing,
# down or not yet configured, so a second run changes nothing and takes seconds.
# It never touches a server it did not install or start: a server that already answered before
# this script ever ran is only checked, and if it is not as the suite expects the script stops
# with the commands that would fix it. Servers it installed or started are remembered in
# $IDEM_MACHINE_STATE (default /var/lib/airflow-idempotent-machine).
# Not root: it changes nothing and stops with the exact command to run.
# Usage: bash tools/machine.sh
set -euo pipefail

PG_PORT=${IDEM_MACHINE_PG_PORT:-5432}
MARIADB_PORT=${IDEM_MACHINE_MARIADB_PORT:-3306}
REDIS_PORT=${IDEM_MACHINE_REDIS_PORT:-6379}
STATE=${IDEM_MACHINE_STATE:-/var/lib/airflow-idempotent-machine}
SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

log() { printf '[machine] %s\n' "$*"; }
fail() { printf '[machine] ERROR: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# Without root nothing may change: every action goes through need_root first.
need_root() {
    is_root && return 0
    fail "$1, and this is not root, so nothing was changed. Run \`sudo bash $SCRIPT\` (it installs, configures and starts only what is missing), then make test again"
}

# --- disk ---------------------------------------------------------------------------------------
# A run needs room: the venv (1.8 GB), pyspark built from its sdist into uv's cache (1.1-1.9 GB),
# the Spark groups' tables and logs and the packages below. A full disk otherwise fails deep inside
# a wheel build ("No space left on device", as one CI run did after 20 s), so check first.
NEED_MB=${IDEM_MACHINE_NEED_MB:-6144}
for dir in "$(dirname "$SCRIPT")/.." "${TMPDIR:-/tmp}"; do
    free_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
    if [ "$free_mb" -lt "$NEED_MB" ]; then
        uv_cache=${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uv}
        uv_size=$(du -sh "$uv_cache" 2>/dev/null | cut -f1 || true)
        fail "only ${free_mb} MB free on the filesystem of $(cd "$dir" && pwd), and a run needs about ${NEED_MB} MB (the venv, pyspark's build, Spark's tables and logs). Free space and run again: uv's cache ($uv_cache, ${uv_size:-absent}) keeps old builds until \`uv cache prune\`; old test and bench directories in ${TMPDIR:-/tmp} can go"
    fi
done

# --- packages -----------------------------------------------------------------------------------
# One apt-get install for everything missing (each apt-get call costs seconds on its own).
missing=()
{ have pg_ctlcluster && [ -d /usr/lib/postgresql ]; } || missing+=(postgresql)
have pg_isready || missing+=(postgresql-client)
have mariadbd || missing+=(mariadb-server)
have mariadb || missing+=(mariadb-client)
have redis-server || missing+=(redis-server)
have redis-cli || missing+=(redis-tools)
# The Spark group's standalone cluster (pyspark's JVM processes) needs Java 17 or newer.
# The JDK, not the JRE: `make spark-jars` compiles the provider's Connect command with javac.
{ have java && have javac; } || missing+=(openjdk-17-jdk-headless)
# Delta's and Iceberg's Spark jars come through Maven's own client.
have mvn || missing+=(maven)
# The UI's browser test drives Debian's Chromium through Playwright (a browser download cannot work).
have chromium || [ -x "${IDEM_TEST_CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
    need_root "missing Debian packages: ${missing[*]}"
    log "apt-get update"
    apt-get update -qq
    log "installing ${missing[*]} (Debian packages)"
    # policy-rc.d keeps the packages' own service scripts from starting anything: this script
    # starts the servers itself, on the addresses the suite expects.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    mkdir -p "$STATE"
    for pkg in "${missing[@]}"; do
        case $pkg in
            postgresql) touch "$STATE/postgres" ;;
            mariadb-server) touch "$STATE/mariadb" ;;
            redis-server) touch "$STATE/redis" ;;
        esac
    done
fi

# --- checks -------------------------------------------------------------------------------------
pg_up()      { pg_isready -q -h 127.0.0.1 -p "$PG_PORT"; }
mariadb_up() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P "$MARIADB_PORT" -u root --connect-timeout=2 ping >/dev/null 2>&1; }
redis_up()   { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; }

# The suite's view: trust over TCP as postgres, and each database there.
pg_ready() {
    local db
    for db in test postgres root; do
        PGCONNECT_TIMEOUT=3 psql -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$db" -tAc 'select 1' >/dev/null 2>&1 || return 1
    done
}
# The end-to-end group's Airflow deployments (API server, scheduler and DAG processor, each with a
# pool of up to 15 connections) beside the Spark group's scheduler test and Iceberg catalog went
# past PostgreSQL's default 100 under load: a guarded task failed on "too many clients already".
PG_MAX_CONNECTIONS=300
pg_max_connections() {
    PGCONNECT_TIMEOUT=3 psql -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc 'show max_connections' 2>/dev/null || echo 0
}
pg_connections_ok() { [ "$(pg_max_connections)" -ge "$PG_MAX_CONNECTIONS" ]; }
mariadb_ready() {
    mariadb --protocol=tcp -h 127.0.0.1 -P "$MARIADB_PORT" -u root --connect-timeout=3 -e 'use test' >/dev/null 2>&1
}
redis_ready() {
    [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config get save 2>/dev/null | sed -n 2p)" = "" ] \
        && [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config get appendonly 2>/dev/null | sed -n 2p)" = "no" ]
}

# wait_for NAME CHECK_FUNCTION: up to 60 s.
wait_for() {
    local name=$1 check=$2 i
    for i in $(seq 1 120); do
        if "$check"; then log "$name is up"; return 0; fi
        sleep 0.5
    done
    fail "$name did not answer within 60 s"
}

ours() { [ -e "$STATE/$1" ]; }
mark() { mkdir -p "$STATE"; touch "$STATE/$1"; }

# not_ours NAME FIX: a server this script did not install or start is not as the suite expects.
not_ours() {
    fail "$1 answers but is not as the suite expects, and this script did not install or start it, so it leaves it alone. Fix it yourself: $2"
}

# --- PostgreSQL ---------------------------------------------------------------------------------
pg_cluster() {
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    [ -n "$version" ] || fail "PostgreSQL is installed but has no cluster under /etc/postgresql: run \`pg_createcluster <version> main\`"
    echo "$version"
}

# Sets PG_CHANGED=1 when a file changed (the running server then needs a reload), PG_RESTART=1
# when a setting changed that only a restart applies.
PG_CHANGED=0
PG_RESTART=0
pg_configure() {
    local version hba conf
    version=$(pg_cluster)
    conf=/etc/postgresql/$version/main/postgresql.conf
    hba=/etc/postgresql/$version/main/pg_hba.conf
    # Trust for local TCP, ahead of every other rule (the first matching line wins).
    if ! grep -q '^# airflow-idempotent: trust over local TCP' "$hba"; then
        log "PostgreSQL: trust authentication for 127.0.0.1 and ::1 ($hba)"
        { printf '# airflow-idempotent: trust over local TCP (tools/machine.sh)\n'
          printf 'host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n'
          cat "$hba"; } > "$hba.new"
        chown --reference="$hba" "$hba.new"; chmod --reference="$hba" "$hba.new"
        mv "$hba.new" "$hba"
        PG_CHANGED=1
    fi
    if ! grep -q "^port = $PG_PORT\b" "$conf"; then
        log "PostgreSQL: port $PG_PORT"
        sed -i "s/^#\?port = [0-9]*/port = $PG_PORT/" "$conf"
        PG_CHANGED=1
    fi
    if ! grep -q "^max_connections = $PG_MAX_CONNECTIONS\b" "$conf"; then
        log "PostgreSQL: max_connections = $PG_MAX_CONNECTIONS (applied by a restart)"
        sed -i "s/^#\?max_connections = [0-9]*/max_connections = $PG_MAX_CONNECTIONS/" "$conf"
        PG_RESTART=1
    fi
}

pg_start() {
    local version
    version=$(pg_cluster)
    log "starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
}

pg_databases() {
    local db
    for db in test root; do
        if [ -z "$(psql -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "select 1 from pg_database where datname = '$db'")" ]; then
            log "PostgreSQL: creating database $db"
            psql -w -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "create database \"$db\""
        fi
    done
    if [ -z "$(psql -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "select 1 from pg_roles where rolname = 'root'")" ]; then
        log "PostgreSQL: creating role root (superuser, so psql as root reaches database root)"
        psql -w -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c 'create role root superuser login'
    fi
}

if pg_up && pg_ready && pg_connections_ok; then
    log "PostgreSQL is up and ready"
elif pg_up && pg_ready && ! ours postgres; then
    log "WARNING: PostgreSQL at 127.0.0.1:$PG_PORT allows $(pg_max_connections) connections; the end-to-end group's deployments beside the Spark group can open more (a task then fails with \"too many clients already\"). This script did not start it, so it leaves it alone: set \`max_connections = $PG_MAX_CONNECTIONS\` in its postgresql.conf and restart it"
else
    if pg_up && ! ours postgres; then
        not_ours "PostgreSQL at 127.0.0.1:$PG_PORT" "put \`host all all 127.0.0.1/32 trust\` first in its pg_hba.conf, reload it, and create the databases test and root (\`createdb test; createdb root\` as postgres)"
    fi
    need_root "PostgreSQL at 127.0.0.1:$PG_PORT is down or not configured"
    mark postgres
    pg_configure
    if pg_up && [ "$PG_RESTART" = 1 ]; then
        log "restarting PostgreSQL $(pg_cluster)"
        pg_ctlcluster --skip-systemctl-redirect "$(pg_cluster)" main restart
    elif pg_up; then
        [ "$PG_CHANGED" = 1 ] && pg_ctlcluster --skip-systemctl-redirect "$(pg_cluster)" main reload
    else
        pg_start
    fi
    wait_for PostgreSQL pg_up
    pg_databases
    pg_ready || fail "PostgreSQL answers but the suite still cannot log in as postgres over TCP to test, postgres and root"
fi

# --- MariaDB ------------------------------------------------------------------------------------
mariadb_start() {
    log "starting MariaDB"
    if [ ! -d /var/lib/mysql/mysql ]; then
        log "MariaDB: initialising its data directory"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    install -d -o mysql -g mysql /run/mysqld
    # Its own session and process group, so it outlives this script and a test run's cleanup.
    setsid start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- \
        --user=mysql --bind-address=127.0.0.1 --port="$MARIADB_PORT"
}

# Root over TCP with an empty password, next to the socket login Debian sets up.
mariadb_configure() {
    log "MariaDB: root over TCP with an empty password, database test"
    mariadb -u root <<SQL
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS test;
FLUSH PRIVILEGES;
SQL
}

socket_up() { mariadb-admin -u root --connect-timeout=2 ping >/dev/null 2>&1; }

if mariadb_up && mariadb_ready; then
    log "MariaDB is up and ready"
else
    if (mariadb_up || socket_up) && ! ours mariadb; then
        not_ours "MariaDB at 127.0.0.1:$MARIADB_PORT" "as its root, run \`ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD(''); CREATE DATABASE IF NOT EXISTS test;\`"
    fi
    need_root "MariaDB at 127.0.0.1:$MARIADB_PORT is down or not configured"
    mark mariadb
    socket_up || mariadb_start
    wait_for "MariaDB (socket)" socket_up
    mariadb_configure
    wait_for MariaDB mariadb_ready
fi

# --- Redis --------------------------------------------------------------------------------------
if redis_up && redis_ready; then
    log "Redis is up and ready"
else
    if redis_up && ! ours redis; then
        not_ours "Redis at 127.0.0.1:$REDIS_PORT" "\`redis-cli -p $REDIS_PORT config set save '' && redis-cli -p $REDIS_PORT config set appendonly no\`"
    fi
    need_root "Redis at 127.0.0.1:$REDIS_PORT is down or keeps data on disk"
    mark redis
    if redis_up; then
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config set save '' >/dev/null
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config set appendonly no >/dev/null
    else
        log "starting Redis"
        setsid redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
            --dir /tmp >/dev/null
    fi
    wait_for Redis redis_ready
fi
log "ready: PostgreSQL :$PG_PORT, MariaDB :$MARIADB_PORT, Redis :$REDIS_PORT, $(java -version 2>&1 | head -n 1), $(mvn -B -v 2>/dev/null | sed -n 's/\x1b\[[0-9;]*m//g; 1p' | cut -d' ' -f1-3)"
