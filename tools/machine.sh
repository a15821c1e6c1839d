#!/usr/bin/env bash
# Make this machine ready for `make test`: the Debian packages the suite drives and the local services
# its tests use. Called by `make test` (and so by .ci/run); safe to run again: it only acts on what is
# missing or down. Not root: it changes nothing and prints the exact command to run instead.
# Usage: bash tools/machine.sh
set -euo pipefail

log() { printf '[machine] %s\n' "$*"; }
fail() { printf '[machine] ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

# apt_install PACKAGE...: install Debian packages when root, else stop with the command to run.
APT_UPDATED=0
apt_install() {
    if ! is_root; then
        fail "missing $* and not running as root: run \`sudo apt-get update && sudo apt-get install -y $*\`, then make test again"
    fi
    if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq; APT_UPDATED=1; fi
    log "installing $* (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- packages -----------------------------------------------------------------------------------
# The UI's browser test drives Debian's Chromium through Playwright (a browser download cannot work).
command -v chromium >/dev/null || [ -x "${IDEM_TEST_CHROMIUM:-/usr/bin/chromium}" ] || apt_install chromium
# The Spark group's standalone cluster (pyspark's JVM processes) needs Java 17 or newer.
command -v java >/dev/null || apt_install openjdk-17-jre-headless

# --- services -----------------------------------------------------------------------------------
pg_up()      { pg_isready -q -h 127.0.0.1 -p 5432; }
mariadb_up() { mysqladmin --protocol=tcp -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 ping >/dev/null 2>&1; }
redis_up()   { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

# wait_for NAME CHECK_FUNCTION: up to 30 s.
wait_for() {
    local name=$1 check=$2 i
    for i in $(seq 1 60); do
        if "$check"; then log "$name is up"; return 0; fi
        sleep 0.5
    done
    fail "$name did not answer within 30 s"
}

need_root_to_start() {
    is_root || fail "$1 is down and not running as root: start it with \`sudo $2\`, then make test again"
}

start_postgres() {
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    local version cmd
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    cmd="pg_ctlcluster --skip-systemctl-redirect $version main start"
    need_root_to_start PostgreSQL "$cmd"
    log "starting PostgreSQL $version"
    $cmd
}

start_mariadb() {
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
    need_root_to_start MariaDB "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
    log "starting MariaDB"
    if [ ! -d /run/mysqld ] && id mysql >/dev/null 2>&1; then
        install -d -o mysql -g mysql /run/mysqld
    fi
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
}

start_redis() {
    command -v redis-server >/dev/null || apt_install redis-server
    log "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
}

command -v pg_isready >/dev/null || apt_install postgresql-client
command -v mysqladmin >/dev/null || apt_install mariadb-client
command -v redis-cli >/dev/null || apt_install redis-tools

if pg_up;      then log "PostgreSQL is up"; else start_postgres; wait_for PostgreSQL pg_up; fi
if mariadb_up; then log "MariaDB is up";    else start_mariadb;  wait_for MariaDB mariadb_up; fi
if redis_up;   then log "Redis is up";      else start_redis;    wait_for Redis redis_up; fi
