# SPDX-License-Identifier: Apache-2.0
# Sourced by the benchmarks that run release `herald serve` on SQLite against `herald emulator
# --accept-unknown-tokens` (receipts-bench, template-bench). Expects HERALD, WORK, EMU_PORT,
# CONTROL_PORT and API_PORT; takes the Debian packages the benchmark needs as arguments.
# Defines pids (killed on exit), MASTER, ADMIN (the server's admin key) and SERVE_PID.
start_emulated_serve() {
  local pkg
  for pkg in "$@"; do
    command -v "$pkg" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null; }
  done
  rm -rf "$WORK" && mkdir -p "$WORK"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8" 2>/dev/null
  MASTER=$(openssl rand -hex 32)
  pids=()
  trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
  "$HERALD" emulator --host 127.0.0.1 --port "$EMU_PORT" --no-production --no-fcm --no-webpush --control-port "$CONTROL_PORT" --data-dir "$WORK/emulator" \
    --key-file "$WORK/AuthKey.p8" --key-id TEST123456 --team-id TEAMID1234 --accept-unknown-tokens --log-level warning > "$WORK/emulator.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -s $WORK/emulator/ca.pem ]] && break; sleep 0.1; done
  HERALD_MASTER_KEY=$MASTER "$HERALD" serve --port "$API_PORT" --no-emulator --no-dashboard --data-dir "$WORK/data" \
    --apns-host 127.0.0.1 --apns-port "$EMU_PORT" --apns-ca-file "$WORK/emulator/ca.pem" --register-address-limit 0 \
    --log-level warning > "$WORK/serve.log" 2>&1 &
  SERVE_PID=$!
  pids+=("$SERVE_PID")
  for _ in $(seq 100); do grep -q "Herald listening" "$WORK/serve.log" && break; sleep 0.1; done
  ADMIN=$(grep -A1 "Admin API key" "$WORK/serve.log" | tail -n 1 | tr -d ' ')
}
