#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The registration lane against the router, in one run: two release `herald serve` on SQLite
# from the same binary, one answering registrations in the lane (the default), one through the
# router (--no-registration-lane), and short wrk runs of new-token registrations with the
# register key alternated between them, so that the host's drift falls on both alike. Prints each
# run's rate and herald's CPU per registration (user + system, from /proc), then the medians and
# the lane's ratio to the router. Both databases grow as the runs go (each run registers new
# devices), so later pairs are slower than earlier ones: compare within a pair. Not a test:
# nothing fails on a number. With BEFORE=<binary>, the reference is that build's lane instead of
# the router: two builds' lanes, before and after a change, in one run.
#
#   Benchmarks/lane-bench.sh                 # PAIRS=8 DURATION=5
#   HERALD=/path/to/herald Benchmarks/lane-bench.sh
#   HERALD=/path/to/new BEFORE=/path/to/old Benchmarks/lane-bench.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/.build-bench/lane
PAIRS=${PAIRS:-8}
SECONDS_EACH=${DURATION:-5}
LANE_PORT=${LANE_PORT:-18601}
ROUTER_PORT=${ROUTER_PORT:-18602}
source "$ROOT/Benchmarks/common.sh"

ensure_packages wrk curl python3
use_herald
rm -rf "$WORK" && mkdir -p "$WORK"
trap cleanup_processes EXIT

# serve NAME PORT BINARY [FLAG...]: the common start_api_server for one of the two servers (its
# own directory, port and binary), with app `bench`; sets NAME_PID and NAME_KEY (a register key).
serve() {
  local name=$1 port=$2 binary=$3
  shift 3
  mkdir -p "$WORK/$name"
  WORK=$WORK/$name API_PORT=$port HERALD=$binary start_api_server "$WORK/$name/data" --no-emulator "$@"
  printf -v "${name}_PID" '%s' "$SERVE_PID"
  api POST /v1/apps '{"id":"bench","bundleId":"com.example.app"}' >/dev/null
  printf -v "${name}_KEY" '%s' "$(api POST /v1/keys '{"scope":"register","appId":"bench"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')"
}
serve lane "$LANE_PORT" "$HERALD"
if [[ -n ${BEFORE:-} ]]; then
  serve router "$ROUTER_PORT" "$BEFORE"
  REFERENCE="the lane, before ($BEFORE)"
else
  serve router "$ROUTER_PORT" "$HERALD" --no-registration-lane
  REFERENCE="the router"
fi
wrk_script register

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS=$(getconf CLK_TCK)
# measure NAME PORT PID KEY SEED: one wrk run; prints "NAME rate herald-µs".
measure() {
  local before after output rate errors
  before=$(cpu_of "$3")
  output=$(KEY=$4 SEED=$5 wrk -t 2 -c 64 -d "${SECONDS_EACH}s" -s "$WORK/register.lua" "http://127.0.0.1:$2/v1/apps/bench/devices")
  after=$(cpu_of "$3")
  read -r rate errors <<< "$(sed -n 's/^RESULT rate=\([0-9]*\) .* errors=\([0-9]*\)$/\1 \2/p' <<< "$output")"
  [[ -n ${rate:-} && $errors == 0 ]] || { printf '%s: wrk: %s\n' "$1" "$output" >&2; exit 1; }
  python3 -c "print('$1', $rate, round(($after - $before) / $TICKS / ($rate * $SECONDS_EACH) * 1e6, 1))"
}
log "warm-up: one run each, untimed"
measure lane "$LANE_PORT" "$lane_PID" "$lane_KEY" 1 >/dev/null
measure router "$ROUTER_PORT" "$router_PID" "$router_KEY" 1 >/dev/null
for pair in $(seq "$PAIRS"); do
  measure lane "$LANE_PORT" "$lane_PID" "$lane_KEY" $((pair + 100))
  measure router "$ROUTER_PORT" "$router_PID" "$router_KEY" $((pair + 100))
done | tee "$WORK/runs.txt"
python3 - "$WORK/runs.txt" "$PAIRS" "$SECONDS_EACH" "$REFERENCE" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def of(name, column): return [float(row[column]) for row in rows if row[0] == name]
lane, router = of("lane", 1), of("router", 1)
print(f"\nregistrations (register key, new tokens; wrk -t 2 -c 64, {sys.argv[2]} pairs of {sys.argv[3]} s, alternated)")
print("| path | req/s (median) | herald CPU per registration (median) |")
print("|---|---:|---:|")
print(f"| the lane | {statistics.median(lane):,.0f} | {statistics.median(of('lane', 2)):.1f} µs |")
print(f"| {sys.argv[4]} (reference) | {statistics.median(router):,.0f} | {statistics.median(of('router', 2)):.1f} µs |")
ratios = [a / b for a, b in zip(lane, router)]
print(f"lane / reference, pair by pair: {' '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
PY
