#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# How fast is the APNs emulator with full validation on? h2load pushes the same notifications
# to the emulator (a real virtual device, a real ES256 token, every check on) and to
# ../shared/bench's apns-sink (a C throughput sink that checks almost nothing), in the same
# run, interleaved, and prints both rates and their ratio. Not a test: nothing here fails on
# a number.
#
#   Benchmarks/emulator-vs-sink.sh            # N=200000 RUNS=3 CASES="1x100 1x1000 4x100"
#
# Env: N (requests per h2load run), RUNS, CASES ("<connections>x<streams>" ...),
#      BENCH_DIR (default ../shared/bench), PORT_BASE (default 18440), HERALD (a built binary).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench
N=${N:-200000}
RUNS=${RUNS:-3}
CASES=${CASES:-"1x100 1x1000 4x100"}
PORT_BASE=${PORT_BASE:-18440}
SINK_PORT=$PORT_BASE
EMU_PORT=$((PORT_BASE + 1))
CONTROL_PORT=$((PORT_BASE + 2))
mkdir -p "$WORK"
log() { printf '== %s\n' "$*" >&2; }

need=()
for pkg in nghttp2-client libnghttp2-dev libssl-dev gcc curl python3; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  log "apt-get install ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ ! -x $WORK/apns-sink || $BENCH_DIR/server/apns-sink.c -nt $WORK/apns-sink ]]; then
  log "build apns-sink from $BENCH_DIR/server/apns-sink.c"
  gcc -O2 -o "$WORK/apns-sink" "$BENCH_DIR/server/apns-sink.c" -lnghttp2 -lssl -lcrypto -lpthread
fi
if [[ ! -s $WORK/sink.crt ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/sink.key" -out "$WORK/sink.crt" \
    -days 3650 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
fi
[[ -s $WORK/AuthKey.p8 ]] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8"

# HERALD=<binary> measures that build instead of building this tree's.
if [[ -z ${HERALD:-} ]]; then
  log "swift build -c release --product herald"
  (cd "$ROOT" && swift build -c release --product herald 2>&1 | tail -n 1 >&2)
  HERALD=$ROOT/.build/release/herald
fi

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$WORK/apns-sink" --port "$SINK_PORT" --cert "$WORK/sink.crt" --key "$WORK/sink.key" --threads 1 --max-streams 1000 \
  --max-seconds 3600 > "$WORK/sink.log" 2>&1 &
pids+=($!)
"$HERALD" emulator --host 127.0.0.1 --port "$EMU_PORT" --no-production --no-fcm --no-webpush --control-port "$CONTROL_PORT" \
  --data-dir "$WORK/emulator" --key-file "$WORK/AuthKey.p8" --key-id TEST123456 --team-id TEAMID1234 \
  --log-level warning > "$WORK/emulator.log" 2>&1 &
EMU_PID=$!
pids+=($EMU_PID)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$CONTROL_PORT/v1/health" >/dev/null && break; sleep 0.1; done

TOKEN=$(curl -sf -X POST "http://127.0.0.1:$CONTROL_PORT/v1/devices" -d '{"bundleId":"com.example.app"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
JWT=$("$HERALD" token --key-file "$WORK/AuthKey.p8" --key-id TEST123456 --team-id TEAMID1234)
PAYLOAD=$BENCH_DIR/data/payload.json
HEADERS=(-H "authorization: bearer $JWT" -H "apns-topic: com.example.app" -H "apns-push-type: alert"
  -H "apns-priority: 10" -H "apns-expiration: 0")

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# h2load prints "finished in 1.23s, 45678.90 req/s, ..." and "N succeeded"
rate() { # url connections streams pid -> "req/s succeeded cpu_us_per_req"
  local before after out
  before=$(cpu_ticks "$4")
  out=$(h2load -n "$N" -c "$2" -m "$3" -d "$PAYLOAD" "${HEADERS[@]}" "$1" 2>&1)
  after=$(cpu_ticks "$4")
  local rps ok
  rps=$(sed -n 's/^finished in [0-9.]*m\{0,1\}s, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
  local hz; hz=$(getconf CLK_TCK)
  echo "${rps:-0} ${ok:-0} $(python3 -c "print(round(($after-$before)/$hz*1e6/$N, 1))")"
}

SINK_PID=${pids[0]}
printf '\n| h2load | apns-sink req/s | emulator req/s | ratio | emulator µs CPU/req | sink µs CPU/req |\n|---|---:|---:|---:|---:|---:|\n'
for case in $CASES; do
  c=${case%x*}; m=${case#*x}
  sink_rates=(); emu_rates=(); emu_cpu=(); sink_cpu=()
  for run in $(seq "$RUNS"); do
    read -r srps sok scpu < <(rate "https://127.0.0.1:$SINK_PORT/3/device/$(printf 'a%.0s' $(seq 64))" "$c" "$m" "$SINK_PID")
    read -r erps eok ecpu < <(rate "https://127.0.0.1:$EMU_PORT/3/device/$TOKEN" "$c" "$m" "$EMU_PID")
    [[ $sok == "$N" && $eok == "$N" ]] || log "warning: not every request succeeded (sink $sok, emulator $eok of $N)"
    sink_rates+=("$srps"); emu_rates+=("$erps"); sink_cpu+=("$scpu"); emu_cpu+=("$ecpu")
    log "$case run $run: sink $srps req/s, emulator $erps req/s"
  done
  python3 - "$case" "${sink_rates[*]}" "${emu_rates[*]}" "${emu_cpu[*]}" "${sink_cpu[*]}" <<'PY'
import statistics, sys
case, sink, emu, ecpu, scpu = sys.argv[1], *[list(map(float, a.split())) for a in sys.argv[2:]]
s, e = statistics.median(sink), statistics.median(emu)
print(f"| -c {case.split('x')[0]} -m {case.split('x')[1]} | {s:,.0f} | {e:,.0f} | {e/s:.2f}x | {statistics.median(ecpu):.1f} | {statistics.median(scpu):.1f} |")
PY
done
DELIVERED=$(curl -sf "http://127.0.0.1:$CONTROL_PORT/v1/counters" | python3 -c 'import json,sys; c=json.load(sys.stdin); print(c["accepted"], c["delivered"], c["rejectedTotal"])')
printf '\nemulator counters (accepted delivered rejected): %s\n' "$DELIVERED"
