#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The API's request rate under wrk (Debian's), against a release `herald serve` on SQLite, with
# the API's own ceiling measured in the same run: `GET /livez`, which passes every middleware
# and does no work. Then, each on the same server and connections:
#   - `GET /health` (asks the database);
#   - an authenticated read, `GET /v1/apps/bench` (admin key);
#   - registrations, `PUT /v1/apps/bench/devices/<random token>` with the register key that
#     ships in apps: of new tokens (fresh installs), and of tokens registered before (every
#     installed device registering again on launch after an app release: the storm);
#   - registrations of new tokens with a send key and a user id (the backend's own registrations).
# Every row prints its rate, its ratio to /livez, its latency and its non-2xx answers. Not a
# test: nothing fails on a number.
#
# Before the measured rows, registrations of new tokens run untimed for WARMUP seconds (twice
# DURATION by default): the devices that the "known tokens again" rows register again, in the
# same order (the same seed); the script counts any device those rows added, so a row that
# outran the warm-up's tokens shows. Every other registration row has tokens of its own: wrk's
# random generator starts alike in every run, so without a seed of their own each run would
# register the first run's tokens again (an update, not a new device), as this script did
# until 2026-11-28.
#
#   Benchmarks/api-bench.sh            # THREADS=2 CONNECTIONS=64 DURATION=10 ROUNDS=2 WARMUP=20
#   HERALD=/path/to/herald Benchmarks/api-bench.sh   # another build (no build step)
#   HERALD_NO_REGISTRATION_LANE=1 Benchmarks/api-bench.sh   # registrations through the router,
#       not the registration lane (the server reads its settings from the environment)
#   DRIVER=postgres Benchmarks/api-bench.sh            # on PostgreSQL: a fresh database on
#       PG_URL's server, or on a private durable server (fsync and synchronous_commit on, the
#       defaults) that the script starts in PG_DIR (.build-bench/pg) on PG_PORT (25481) and stops
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/.build-bench/api
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
# Not SECONDS: bash's own counter of the seconds since the shell started, always set.
SECONDS_EACH=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-$((2 * SECONDS_EACH))}
API_PORT=${API_PORT:-18470}
DRIVER=${DRIVER:-sqlite}
source "$ROOT/Benchmarks/common.sh"

ensure_packages wrk curl python3
use_herald
rm -rf "$WORK" && mkdir -p "$WORK"
STORE_ARGS=()
STOP_PG=
if [[ $DRIVER == postgres ]]; then
  if [[ -z ${PG_URL:-} ]]; then
    export HERALD_PG_DIR=${PG_DIR:-$ROOT/.build-bench/pg} HERALD_PG_PORT=${PG_PORT:-25481}
    # Durable, as a provider runs it (the test server's fsync=off would flatter every commit).
    PG_URL=$(HERALD_PG_OPTIONS="-c synchronous_commit=on" "$ROOT/scripts/postgres-test-server" start)
    STOP_PG=1
  fi
  psql "$PG_URL" -qc "DROP DATABASE IF EXISTS herald_api_bench" && psql "$PG_URL" -qc "CREATE DATABASE herald_api_bench"
  DATABASE_URL=${PG_URL/\/postgres\?//herald_api_bench?}
  STORE_ARGS=(--database "$DATABASE_URL")
  # A shared database needs a master key given, not generated.
  mkdir -p "$WORK/data" && printf '%s' "$(openssl rand -hex 32)" > "$WORK/data/master.key"
  log "PostgreSQL: $DATABASE_URL"
fi
trap 'cleanup_processes; [[ -n $STOP_PG ]] && "$ROOT/scripts/postgres-test-server" stop || true' EXIT
start_api_server "$WORK/data" ${STORE_ARGS[@]+"${STORE_ARGS[@]}"}

api POST /v1/apps '{"id":"bench","bundleId":"com.example.app"}' >/dev/null
# The register key as shipped in apps; a backend's send key. Verified user binding stays on:
# the register key registers anonymous devices, as a fresh install does before sign-in.
REGISTER_KEY=$(api POST /v1/keys '{"scope":"register","appId":"bench","name":"bench-register"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
SEND_KEY=$(api POST /v1/keys '{"scope":"send","appId":"bench","name":"bench-send"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')

# wrk scripts (Benchmarks/wrk): a method, a body, and for registrations a fresh random token per request.
wrk_script get
wrk_script register

# run NAME KEY SCRIPT PATH [ENV...]: one wrk run; prints "rate p50 p99 errors".
run() {
  local name=$1 key=$2 script=$3 path=$4
  shift 4
  local output result
  output=$(env KEY="$key" "$@" wrk -t "$THREADS" -c "$CONNECTIONS" -d "${SECONDS_EACH}s" -s "$WORK/$script" "$BASE$path" 2>&1 || true)
  result=$(sed -n 's/^RESULT rate=\([0-9]*\) p50=\([0-9.]*\) p99=\([0-9.]*\) errors=\([0-9]*\)$/\1 \2 \3 \4/p' <<< "$output")
  # A run that printed no result (wrk refused its arguments, the server died) ends the script.
  [[ -n $result ]] || { printf '%s: wrk gave no result:\n%s\n' "$name" "$output" >&2; exit 1; }
  echo "$result"
}
fresh_seed() { od -An -N4 -tu4 /dev/urandom | tr -d ' '; }
device_count() {
  if [[ $DRIVER == postgres ]]; then
    psql "$DATABASE_URL" -Atc 'select count(*) from devices'
  else
    python3 -c "import sqlite3; print(sqlite3.connect('$WORK/data/herald.sqlite').execute('select count(*) from devices').fetchone()[0])"
  fi
}
# The warm-up's tokens, registered again by the re-registration row (the same seed).
WARMUP_SEED=$(fresh_seed)
log "warm-up: registrations for ${WARMUP} s, untimed"
out=$(SECONDS_EACH=$WARMUP run warm-up "$REGISTER_KEY" register.lua /v1/apps/bench/devices SEED="$WARMUP_SEED")
read -r warmup _ <<< "$out"
warmed=$(device_count)
declare -A rates p50s p99s errs
cases=("GET /livez (ceiling)" "GET /health" "GET /v1/apps/bench (admin key)" "PUT device, register key: new tokens"
  "PUT device, register key: known tokens again" "PUT device + userId, send key: new tokens")
again_new=0
for round in $(seq "$ROUNDS"); do
  log "round $round"
  for name in "${cases[@]}"; do
    case $name in
      "GET /livez"*) out=$(run "$name" "" get.lua /livez) ;;
      "GET /health") out=$(run "$name" "" get.lua /health) ;;
      "GET /v1/apps"*) out=$(run "$name" "$ADMIN" get.lua /v1/apps/bench) ;;
      "PUT device, register key: new tokens") out=$(run "$name" "$REGISTER_KEY" register.lua /v1/apps/bench/devices SEED="$(fresh_seed)") ;;
      "PUT device + userId"*) out=$(run "$name" "$SEND_KEY" register.lua /v1/apps/bench/devices SEED="$(fresh_seed)" WITH_USER=1) ;;
      *"known tokens again")
        before=$(device_count)
        out=$(run "$name" "$REGISTER_KEY" register.lua /v1/apps/bench/devices SEED="$WARMUP_SEED")
        again_new=$((again_new + $(device_count) - before)) ;;
    esac
    read -r rate p50 p99 errors <<< "$out"
    log "$name: $rate/s p50 $p50 ms p99 $p99 ms errors $errors"
    rates[$name]="${rates[$name]:-} $rate"; p50s[$name]=$p50; p99s[$name]=$p99; errs[$name]=$(( ${errs[$name]:-0} + errors ))
  done
done
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ceiling=$(median "${rates["GET /livez (ceiling)"]}")
echo
echo "$DRIVER; wrk -t $THREADS -c $CONNECTIONS -d ${SECONDS_EACH}s, $ROUNDS rounds interleaved, median rate; latency from the last round ($(nproc) cores, $(date -u +%FT%TZ))"
echo
echo "| request | req/s (median) | runs | × /livez | p50 ms | p99 ms | non-2xx or socket errors |"
echo "|---|---:|---|---:|---:|---:|---:|"
for name in "${cases[@]}"; do
  m=$(median "${rates[$name]}")
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$m" "$(echo ${rates[$name]} | tr ' ' '/')" \
    "$(awk -v a="$m" -v b="$ceiling" 'BEGIN{printf "%.2f", a/b}')" "${p50s[$name]}" "${p99s[$name]}" "${errs[$name]}"
done
echo
echo "warm-up before the rows (untimed, register key, new tokens, ${WARMUP} s): $warmup registrations/s, $warmed devices"
echo "devices the 'known tokens again' rows added: $again_new (0: each of their requests registered a warm-up device again;"
echo "  more: they outran the warm-up's tokens, so make WARMUP longer)"
echo "devices registered: $(device_count)"
