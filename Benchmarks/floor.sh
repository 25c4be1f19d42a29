#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What issue 24's goals leave per operation on this machine, against the floors measured in the
# same run: not herald's speed, but how much CPU the two cores have for each registration and
# each notification at the goal's rate, and how much of it the parts that are not herald's own
# code already take. All figures are CPU time per operation (user + system).
#
# Registrations (goal: 20,000/s; wrk shares the two cores, so 2 s of CPU a second = 100 µs per
# registration for herald and wrk together):
#   - wrk's own CPU per request (the api-bench's register script: a random token each);
#   - herald's HTTP floor: `GET /livez`, which passes every middleware and does nothing;
#   - SQLite's floor: the registration's statements in C (Benchmarks/floor/sqlite-floor.c) on a
#     copy of the database that the run's registrations made, with Herald's settings;
#   - herald's CPU per registration now (register key, new tokens), for comparison.
# Sends (goal: 0.8× the raw client in serve-bench.sh):
#   - the raw client (herald-bench) and apns-sink per notification at the raw rate: what any
#     delivery costs the two cores before Herald's API, store and engine do anything;
#   - SQLite's floor per notification: one delivery row (in INSERTs of 64) and one token of a
#     listed audience looked up (on the writer's connection, as Herald does, and on a reader
#     while another connection commits between lookups, as Herald did); beside them, what a
#     delivery would cost recorded as a thousandth of one row per chunk (a model Herald does not
#     have: the measure of what it would buy).
# Not a test: nothing fails on a number.
#
#   Benchmarks/floor.sh                 # DURATION=8 WARMUP=10
#   HERALD=/path/to/herald Benchmarks/floor.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench/floor
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-10}
SINK_PORT=${SINK_PORT:-18475}
API_PORT=${API_PORT:-18476}
rm -rf "$WORK" && mkdir -p "$WORK"
source "$ROOT/Benchmarks/common.sh"
bench_setup wrk libsqlite3-dev
trap cleanup_processes EXIT
gcc -O2 -o "$WORK/sqlite-floor" "$ROOT/Benchmarks/floor/sqlite-floor.c" -lsqlite3

start_api_server "$WORK/data"
api POST /v1/apps '{"id":"bench","bundleId":"com.example.app"}' >/dev/null
REGISTER_KEY=$(api POST /v1/keys '{"scope":"register","appId":"bench","name":"floor"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
# The api-bench's scripts: GET, and a registration of a random token per request.
wrk_script get
wrk_script register

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)
# measure NAME SECONDS SCRIPT PATH [ENV...]: one wrk run; prints "rate herald-µs wrk-µs" per request.
measure() {
  local name=$1 seconds=$2 script=$3 path=$4 before after
  shift 4
  before=$(cpu_of "$SERVE_PID")
  env "$@" python3 - "$seconds" "$WORK/$script" "$BASE$path" > "$WORK/measure.out" <<'PY'
import re, resource, subprocess, sys
out = subprocess.run(["wrk", "-t", "2", "-c", "64", "-d", sys.argv[1] + "s", "-s", sys.argv[2], sys.argv[3]],
                     capture_output=True, text=True).stdout
used = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"RESULT rate=(\d+) p50=\S+ p99=\S+ errors=(\d+)", out)
if not m or m.group(2) != "0":
    sys.exit("wrk: " + out)
print(m.group(1), used.ru_utime + used.ru_stime)
PY
  after=$(cpu_of "$SERVE_PID")
  read -r rate wrk_cpu < "$WORK/measure.out"
  python3 -c "r, s = $rate, $seconds; print(r, ($after - $before) / $TICKS / (r * s) * 1e6, $wrk_cpu / (r * s) * 1e6)"
  log "$name: $rate/s"
}
log "warm-up: registrations for ${WARMUP} s"
measure warm-up "$WARMUP" register.lua /v1/apps/bench/devices KEY="$REGISTER_KEY" SEED=1 >/dev/null
read -r livez_rate livez_herald livez_wrk <<< "$(measure "GET /livez" "$DURATION" get.lua /livez KEY=)"
read -r reg_rate reg_herald reg_wrk <<< "$(measure "PUT device" "$DURATION" register.lua /v1/apps/bench/devices KEY="$REGISTER_KEY" SEED=2)"
devices=$(python3 -c "import sqlite3; print(sqlite3.connect('$WORK/data/herald.sqlite').execute('select count(*) from devices').fetchone()[0])")
kill "$SERVE_PID" && wait "$SERVE_PID" 2>/dev/null || true

# SQLite's floors, each on its own copy of the run's database (SQLite's backup: one consistent
# snapshot, the WAL's pages included).
floor() {
  rm -f "$WORK/copy.sqlite" "$WORK/copy.sqlite-wal" "$WORK/copy.sqlite-shm"
  python3 -c "import sqlite3; sqlite3.connect('$WORK/data/herald.sqlite').backup(sqlite3.connect('$WORK/copy.sqlite'))"
  "$WORK/sqlite-floor" "$1" "$WORK/copy.sqlite" bench "$2" | sed -n 's/^RESULT .* us=\([0-9.]*\)$/\1/p'
}
sql_register=$(floor register 50000)
sql_delivery=$(floor deliveries 200000)
sql_chunk=$(floor chunk 200000)
sql_lookup=$(floor lookup 200000)
sql_lookup_busy=$(floor lookup-busy 200000)

# The raw client and the sink, each one's CPU per notification, median rate of three.
start_sink
SINK_PID=${pids[-1]}
sleep 0.5
raw_runs=()
for _ in 1 2 3; do
  sink_before=$(cpu_of "$SINK_PID")
  (cd "$WORK" && python3 - "$ROOT/.build/release/herald-bench" "$SINK_PORT" "$BENCH_DIR/data/payload.json") > "$WORK/raw.out" <<'PY'
import re, resource, subprocess, sys
n = 300000
out = subprocess.run([sys.argv[1], "--port", sys.argv[2], "-n", str(n), "-c", "1000", "--ca-file", "sink.crt",
                      "--key-file", "AuthKey.p8", "--payload-file", sys.argv[3]], capture_output=True, text=True).stdout
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(re.search(r"rate=(\d+)", out).group(1), (used.ru_utime + used.ru_stime) / n * 1e6)
PY
  sink_after=$(cpu_of "$SINK_PID")
  read -r rate client_us < "$WORK/raw.out"
  raw_runs+=("$rate $client_us $(python3 -c "print(($sink_after - $sink_before) / $TICKS / 300000 * 1e6)")")
done
read -r raw_rate raw_client raw_sink <<< "$(printf '%s\n' "${raw_runs[@]}" | sort -n | sed -n 2p)"

python3 - "$livez_rate" "$livez_herald" "$livez_wrk" "$reg_rate" "$reg_herald" "$reg_wrk" "$devices" \
  "$sql_register" "$sql_delivery" "$sql_lookup" "$raw_rate" "$raw_client" "$raw_sink" "$sql_chunk" "$sql_lookup_busy" <<'PY'
import sys
(livez_rate, livez_herald, livez_wrk, reg_rate, reg_herald, reg_wrk, devices,
 sql_register, sql_delivery, sql_lookup, raw_rate, raw_client, raw_sink, sql_chunk, sql_lookup_busy) = map(float, sys.argv[1:])
cores = 2e6  # µs of CPU a second on this machine's two cores
print("\nRegistrations: the goal is 20,000/s, which leaves %.0f µs of CPU per registration for herald and wrk together." % (cores / 20000))
print()
print("| part | CPU per registration | beside |")
print("|---|---:|---|")
print(f"| wrk, the load generator (register script) | {reg_wrk:.1f} µs | |")
print(f"| herald's HTTP floor: `GET /livez` | {livez_herald:.1f} µs | {livez_rate:,.0f}/s, wrk {livez_wrk:.1f} µs a request |")
print(f"| SQLite's floor: the registration's statements in C ({devices:,.0f} devices) | {sql_register:.1f} µs | |")
floors = reg_wrk + livez_herald + sql_register
print(f"| the three together | {floors:.1f} µs | at most {cores / floors:,.0f}/s on two cores |")
print(f"| herald now, register key, new tokens | {reg_herald:.1f} µs | {reg_rate:,.0f}/s; herald's own code beyond both floors: {reg_herald - livez_herald - sql_register:.1f} µs |")
target = 0.8 * raw_rate
budget = cores / target
print(f"\nSends: the goal is 0.8 × the raw client's {raw_rate:,.0f}/s = {target:,.0f}/s, which leaves {budget:.1f} µs of CPU per notification for herald, the sink and the posters.")
print()
print("| part | CPU per notification | beside |")
print("|---|---:|---|")
print(f"| apns-sink | {raw_sink:.1f} µs | at the raw client's rate |")
print(f"| the APNs client alone (herald-bench, the same client code herald sends with) | {raw_client:.1f} µs | |")
left = budget - raw_sink - raw_client
print(f"| left for herald's API, store and engine (and the posters) | {left:.1f} µs | |")
print(f"| SQLite's floor: one delivery row | {sql_delivery:.2f} µs | in INSERTs of 64 rows |")
print(f"| SQLite's floor: one listed token looked up | {sql_lookup:.2f} µs | in lists of 1,000, on the connection that writes (Herald's since this session) |")
print(f"| the same on a reader while another connection commits between lookups | {sql_lookup_busy:.2f} µs | {sql_lookup_busy / sql_lookup:.1f}× the writer's: each read starts from an empty page cache |")
print(f"| what remains after the two floors | {left - sql_delivery - sql_lookup:.1f} µs | for parsing, accepting, claiming and recording; compare serve-bench's herald CPU per notification minus the client's |")
print(f"| not Herald's model: a delivery recorded as a thousandth of a chunk row | {sql_chunk:.2f} µs | device ids and apns-ids as blobs, {sql_delivery / sql_chunk:.1f}× less than a row |")
PY
