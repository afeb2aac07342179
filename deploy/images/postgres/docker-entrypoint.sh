#!/usr/bin/env bash
# The official postgres image's entrypoint, as far as the compose file uses it (the Dockerfile
# beside this lists what): first start initialises PGDATA, runs the init scripts, then the
# server runs as the postgres user in the foreground.
set -Eeuo pipefail

# VAR from VAR or from the file VAR_FILE names (read as root, before privileges are dropped:
# a secret file may be readable by root only).
file_env() {
  local var=$1 file_var="${1}_FILE" default=${2:-}
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
    echo "docker-entrypoint: both $var and $file_var are set (but are exclusive)" >&2
    exit 1
  fi
  local value=$default
  if [ -n "${!var:-}" ]; then value=${!var}; elif [ -n "${!file_var:-}" ]; then value=$(<"${!file_var}"); fi
  export "$var=$value"
  unset "$file_var"
}

init_database() {
  if [ -z "$POSTGRES_PASSWORD" ]; then
    echo "docker-entrypoint: POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) is not set: the database is not initialised" >&2
    exit 1
  fi
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host=scram-sha-256 ${POSTGRES_INITDB_ARGS:-} >/dev/null
  # As the official image: every address, with a password.
  printf '\nhost all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  # A server on the socket only while the database and the init scripts are made.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p 5432" -w start >/dev/null
  local psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --no-password)
  if [ "$POSTGRES_DB" != postgres ]; then
    "${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<"CREATE DATABASE :\"db\";" >/dev/null
  fi
  local f
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "docker-entrypoint: running $f"; if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) echo "docker-entrypoint: running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *.sql.gz) echo "docker-entrypoint: running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
      *) ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "docker-entrypoint: database initialised in $PGDATA"
}

if [ "${1:0:1}" = - ]; then set -- postgres "$@"; fi
if [ "$1" = postgres ]; then
  file_env POSTGRES_PASSWORD
  file_env POSTGRES_USER postgres
  file_env POSTGRES_DB "$POSTGRES_USER"
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
  fi
  [ -s "$PGDATA/PG_VERSION" ] || init_database
fi
exec "$@"
