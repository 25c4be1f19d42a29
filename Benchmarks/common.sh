# SPDX-License-Identifier: Apache-2.0
# Sourced by the serve and API benchmarks: what they set up the same way. Expects ROOT, BENCH_DIR, WORK
# and SINK_PORT; takes the Debian packages a benchmark needs beyond the sink's as arguments.
# Defines log, SINK, HERALD, pids (killed by cleanup_processes) and the functions below.
log() { printf '== %s\n' "$*" >&2; }

# ensure_packages PKG...: installs the Debian packages that are missing (one apt-get for all).
ensure_packages() {
  local need=() pkg
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
  if ((${#need[@]})); then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; fi
}

# use_herald: HERALD=<binary> measures that build; without it, this tree's release build (built now).
use_herald() {
  if [[ -z ${HERALD:-} ]]; then
    log "swift build -c release --product herald"
    (cd "$ROOT" && swift build -c release --product herald 2>&1 | tail -n 1 >&2)
    HERALD=$ROOT/.build/release/herald
  fi
}

# Installs what is missing, builds apns-sink (once) and release herald / herald-bench, and makes
# the sink's certificate and a .p8 key in $WORK. HERALD=<binary> measures that herald instead
# (another build, for a before/after in the same session).
bench_setup() {
  ensure_packages nghttp2-client libnghttp2-dev libssl-dev gcc curl python3 "$@"
  SINK=$ROOT/.build-bench/apns-sink
  [[ -x $SINK ]] || gcc -O2 -o "$SINK" "$BENCH_DIR/server/apns-sink.c" -lnghttp2 -lssl -lcrypto -lpthread
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/sink.key" -out "$WORK/sink.crt" \
    -days 30 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8" 2>/dev/null
  log "swift build -c release --product herald / herald-bench"
  (cd "$ROOT" && swift build -c release --product herald 2>&1 | tail -n 1 >&2 && swift build -c release --product herald-bench 2>&1 | tail -n 1 >&2)
  HERALD=${HERALD:-$ROOT/.build/release/herald}
}

pids=()
cleanup_processes() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }

start_sink() {
  "$SINK" --port "$SINK_PORT" --cert "$WORK/sink.crt" --key "$WORK/sink.key" --threads 1 --max-streams 1000 --max-seconds 3600 > "$WORK/sink.log" 2>&1 &
  pids+=($!)
}

# Sets RAW: the raw client's rate against the sink, the median of three runs (on this shared
# machine one run's rate moves by ±30%).
measure_raw_client() {
  log "raw client rate (herald-bench, 100000 pushes, 1000 in flight, median of 3)"
  local raws=()
  for _ in 1 2 3; do
    raws+=("$(cd "$WORK" && "$ROOT/.build/release/herald-bench" --port "$SINK_PORT" -n 100000 -c 1000 --ca-file sink.crt --key-file AuthKey.p8 \
      --payload-file "$BENCH_DIR/data/payload.json" | sed -n 's/.*rate=\([0-9]*\).*/\1/p')")
  done
  log "raw client runs: ${raws[*]}"
  RAW=$(printf '%s\n' "${raws[@]}" | sort -n | sed -n 2p)
}

# Starts `herald serve` for the API benchmarks on API_PORT, its data in $1, with any further
# arguments (a store), and waits until it listens. Every request comes from 127.0.0.1, so the
# per-address limit on register-key traffic (60/1) would measure itself: it is off; the per-key
# limits stay on, as shipped. Sets SERVE_PID, ADMIN (the admin key it printed) and BASE.
start_api_server() {
  local data=$1
  shift
  HERALD_REGISTER_ADDRESS_LIMIT=0 "$HERALD" serve --port "$API_PORT" --data-dir "$data" "$@" --log-level warning > "$WORK/serve.log" 2>&1 &
  SERVE_PID=$!
  pids+=($SERVE_PID)
  for _ in $(seq 300); do grep -q "Herald listening" "$WORK/serve.log" && break; sleep 0.1; done
  grep -q "Herald listening" "$WORK/serve.log" || { cat "$WORK/serve.log" >&2; exit 1; }
  ADMIN=$(grep -A1 "Admin API key" "$WORK/serve.log" | tail -n 1 | tr -d ' ')
  BASE=http://127.0.0.1:$API_PORT
}

# api METHOD PATH [JSON]: one request with the admin key to the server start_api_server started.
api() { curl -fsS -X "$1" "$BASE$2" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' ${3:+-d "$3"}; }

# wrk_script NAME: Benchmarks/wrk/NAME.lua with the shared report (its RESULT line) after it, as $WORK/NAME.lua.
wrk_script() { cat "$ROOT/Benchmarks/wrk/$1.lua" "$ROOT/Benchmarks/wrk/report.lua" > "$WORK/$1.lua"; }
