#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fault soak: one broadcast to N virtual devices under each fault mix, and what every device got.
# A release `herald serve` sends through a `herald emulator` (a separate process, on free ports,
# 127.0.0.1 only) whose fault injector is armed before each broadcast; the emulator's own count of
# what each virtual device received says what was lost and what came twice. Not a test: nothing
# fails on a number; the last column says whether the reliability goals (docs/reliability.md) held.
#
#   Benchmarks/fault-soak.sh                      # release build, N=20000, mixes a b c c-drop
#   HERALD_SOAK_DEBUG=1 N=2000 Benchmarks/fault-soak.sh
#
# Mixes (arm the emulator's control API, POST /v1/faults, scope "device"):
#   a       500, 503 and 429 at 1% each, refused streams at 1%, 2 GOAWAYs, 200 ms latency at 5%
#   b       3 connection drops (at 1 request in 1000 until 3 happened) + 503 at 2%
#   c       1 request in 500 drops its connection
#   c-drop  mix c, the send asking "onUnknownOutcome": "drop" (n/a while the server refuses it)
#   none    no fault: every delivery must be sent at attempt 1
# Every row also gives the deliveries' attempts (read from the server's SQLite file): with no
# resend, a delivery is at attempt 1, however its audience was cut into chunks.
# Env: N (20000), MIXES ("none a b c c-drop"), HERALD_SOAK_DEBUG=1 (use the debug build, no release
# build), HERALD_SOAK_SKIP_BUILD=1 (use .build/release/herald as it is), HERALD_SOAK_DROP=1
# (every mix asks for onUnknownOutcome: drop),
# SOAK_EXTRA_JSON (a JSON object merged into every send, e.g. a collapse-id option once the API
# has one; a send the server refuses is n/a), SOAK_TIMEOUT (seconds a broadcast may take before the run gives up on it; 1800), KEEP=1 (keep
# the work folder and logs).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-20000}
MIXES=${MIXES:-"none a b c c-drop"}
SOAK_TIMEOUT=${SOAK_TIMEOUT:-1800}
log() { printf '== %s\n' "$*" >&2; }

if [[ ${HERALD_SOAK_DEBUG:-0} == 1 ]]; then
  BUILD=debug
  [[ -x $ROOT/.build/debug/herald ]] || (cd "$ROOT" && swift build --product herald 2>&1 | tail -n 1 >&2)
else
  BUILD=release
  if [[ ${HERALD_SOAK_SKIP_BUILD:-0} == 1 && -x $ROOT/.build/release/herald ]]; then
    log "using the release herald already built (HERALD_SOAK_SKIP_BUILD=1)"
  else
    log "swift build -c release --product herald (about 10 minutes from scratch)"
    (cd "$ROOT" && swift build -c release --product herald 2>&1 | tail -n 1 >&2)
  fi
fi
HERALD=$ROOT/.build/$BUILD/herald

WORK=$(mktemp -d /tmp/herald-soak.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Waits (bounded: 300 s) until FILE holds a line matching PATTERN; fails with the file otherwise.
wait_for_line() {
  local file=$1 pattern=$2
  for _ in $(seq 1 1500); do
    grep -q "$pattern" "$file" && return 0
    sleep 0.2
  done
  log "no '$pattern' in $file:"; cat "$file" >&2; return 1
}

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8" 2>/dev/null
# Info level: the listeners' ports are logged at start (the emulator logs no request at info).
"$HERALD" emulator --host 127.0.0.1 --port 0 --no-production --no-fcm --no-webpush --control-port 0 --data-dir "$WORK/emulator" \
  --key-file "$WORK/AuthKey.p8" --key-id SOAK123456 --team-id TEAM123456 > "$WORK/emulator.log" 2>&1 &
pids+=($!)
wait_for_line "$WORK/emulator.log" "control API listening"
APNS_PORT=$(sed -n 's/.*emulator.environment=development emulator.port=\([0-9]*\).*/\1/p' "$WORK/emulator.log" | head -n 1)
CONTROL_PORT=$(grep "control API listening" "$WORK/emulator.log" | sed -n 's/.*emulator.port=\([0-9]*\).*/\1/p' | head -n 1)

"$HERALD" serve --port 0 --no-emulator --data-dir "$WORK/serve" --apns-host 127.0.0.1 --apns-port "$APNS_PORT" \
  --apns-ca-file "$WORK/emulator/ca.pem" --log-level warning --metrics-port 0 > "$WORK/serve.log" 2>&1 &
pids+=($!)
HERALD_PID=${pids[-1]}
wait_for_line "$WORK/serve.log" "Metrics at"
API_PORT=$(sed -n 's/.*Herald listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
METRICS_PORT=$(sed -n 's/.*Metrics at http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
ADMIN=$(grep -A1 "Admin API key" "$WORK/serve.log" | tail -n 1 | tr -d ' ')
log "$BUILD herald $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'): API :$API_PORT, emulator :$APNS_PORT (control :$CONTROL_PORT), $N devices"

export API_PORT METRICS_PORT CONTROL_PORT ADMIN N MIXES SOAK_TIMEOUT BUILD HERALD_PID WORK
export KEY_FILE=$WORK/AuthKey.p8 SOAK_DROP=${HERALD_SOAK_DROP:-0} SOAK_EXTRA_JSON=${SOAK_EXTRA_JSON:-}
python3 - <<'PY'
import http.client, json, os, sys, threading, time

api_port, control_port, admin = int(os.environ["API_PORT"]), int(os.environ["CONTROL_PORT"]), os.environ["ADMIN"]
n, mixes, soak_timeout = int(os.environ["N"]), os.environ["MIXES"].split(), float(os.environ["SOAK_TIMEOUT"])
bundle = "com.example.soak"

def log(text):
    print("== " + text, file=sys.stderr, flush=True)

class Client:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:port, reopened if it breaks."""
    def __init__(self, port, key=None):
        self.port, self.key, self.connection = port, key, None
    def call(self, method, path, body=None):
        headers = {"content-type": "application/json"}
        if self.key: headers["authorization"] = "Bearer " + self.key
        for attempt in range(5):
            try:
                if self.connection is None: self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                self.connection.request(method, path, None if body is None else json.dumps(body), headers)
                response = self.connection.getresponse()
                text = response.read()
                return response.status, (json.loads(text) if text else None)
            except (http.client.HTTPException, OSError):
                self.connection = None
                if attempt == 4: raise
                time.sleep(0.5)

def must(result, what):
    status, body = result
    if status >= 300: sys.exit(f"{what}: {status} {body}")
    return body

# The app and its credentials in Herald; N virtual devices in the emulator, registered in Herald.
api = Client(api_port, admin)
control = Client(control_port)
must(api.call("POST", "/v1/apps", {"id": "soak", "bundleId": bundle}), "create app")
must(api.call("PUT", "/v1/apps/soak/credentials/development",
              {"keyId": "SOAK123456", "teamId": "TEAM123456", "privateKey": open(os.environ["KEY_FILE"]).read()}), "credentials")
tokens, lock = [], threading.Lock()
def make(count):
    c, a = Client(control_port), Client(api_port, admin)
    for _ in range(count):
        token = must(c.call("POST", "/v1/devices", {"bundleId": bundle, "environment": "development", "kind": "device"}), "device")["token"]
        must(a.call("PUT", "/v1/apps/soak/devices/" + token, {"environment": "sandbox"}), "register")
        with lock: tokens.append(token)
start = time.time()
threads = [threading.Thread(target=make, args=(n // 4 + (1 if i < n % 4 else 0),)) for i in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
if len(tokens) != n: sys.exit(f"registered {len(tokens)} of {n} devices")
log(f"{n} devices created and registered in {time.time() - start:.0f} s")
token_set = set(tokens)

def received():
    devices = must(control.call("GET", "/v1/devices"), "devices")["devices"]
    return {d["token"]: d["receivedCount"] for d in devices if d["token"] in token_set}

def counters():
    return must(control.call("GET", "/v1/counters"), "counters")

# The fault rules of each mix (scope "device": the pushes of the broadcast).
MIX = {
    "a": [{"type": "status", "status": 500, "probability": 0.01, "persistent": True},
          {"type": "status", "status": 503, "probability": 0.01, "persistent": True},
          {"type": "status", "status": 429, "probability": 0.01, "persistent": True},
          {"type": "refuse-stream", "probability": 0.01, "persistent": True},
          {"type": "goaway", "reason": "Shutdown", "probability": 0.0005, "count": 2},
          {"type": "latency", "milliseconds": 200, "probability": 0.05, "persistent": True}],
    "b": [{"type": "drop", "probability": 0.001, "count": 3},
          {"type": "status", "status": 503, "probability": 0.02, "persistent": True}],
    "c": [{"type": "drop", "probability": 0.002, "persistent": True}],
    "none": [],
}
MIX["c-drop"] = MIX["c"]
DESCRIBE = {"a": "a: 500/503/429 1% each, refused streams 1%, 2 GOAWAY, latency 5%",
            "b": "b: 3 connection drops + 503 at 2%", "c": "c: 1 request in 500 drops its connection",
            "c-drop": "c + onUnknownOutcome: drop", "none": "none: no fault"}

def unknown_outcomes():
    """herald_unknown_outcomes_total for app soak, summed over decisions: the pushes written and
    left unanswered by a lost connection (or a deadline) — the requests in flight at the drops."""
    connection = http.client.HTTPConnection("127.0.0.1", int(os.environ["METRICS_PORT"]), timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("herald_unknown_outcomes_total{") and 'app="soak"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)

def attempts(notification_id):
    """The notification's deliveries by attempt count, read from the server's SQLite file."""
    import sqlite3
    db = sqlite3.connect(f"file:{os.environ['WORK']}/serve/herald.sqlite?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT attempts, count(*) FROM deliveries WHERE notification_id = ? GROUP BY attempts ORDER BY attempts",
                          (notification_id,)).fetchall()
    finally:
        db.close()
    return " ".join(f"{a}:{c}" for a, c in rows)

rows = []
for mix in mixes:
    if mix not in MIX: sys.exit(f"unknown mix {mix} (none, a, b, c, c-drop)")
    nonce = f"soak-{mix}-{os.urandom(4).hex()}"
    body = {"audience": "all", "title": "soak", "body": nonce}
    drop = mix == "c-drop" or os.environ["SOAK_DROP"] == "1"
    if drop: body["onUnknownOutcome"] = "drop"
    if os.environ["SOAK_EXTRA_JSON"]: body.update(json.loads(os.environ["SOAK_EXTRA_JSON"]))
    before, faults_before, unknown_before = received(), counters().get("faultsInjected", 0), unknown_outcomes()
    must(control.call("DELETE", "/v1/faults"), "clear faults")
    for rule in MIX[mix]: must(control.call("POST", "/v1/faults", dict(rule, scope="device")), "arm fault")
    start = time.time()
    status, sent = api.call("POST", "/v1/apps/soak/notifications", body)
    if status >= 300:
        # A field this server does not know yet (onUnknownOutcome, collapseId): n/a, not a failure.
        must(control.call("DELETE", "/v1/faults"), "clear faults")
        reason = (sent or {}).get("error", {}).get("message", str(status)) if isinstance(sent, dict) else str(status)
        log(f"mix {mix}: the server refused the send ({status}): {reason}")
        rows.append((DESCRIBE[mix], None, reason))
        continue
    nid = sent["id"]
    counts, finished = {}, None
    while time.time() - start < soak_timeout:
        counts = must(api.call("GET", f"/v1/apps/soak/notifications/{nid}"), "status")["counts"]
        if counts.get("pending", 1) == 0:
            finished = time.time() - start
            break
        time.sleep(0.25)
    must(control.call("DELETE", "/v1/faults"), "clear faults")
    faults = counters().get("faultsInjected", 0) - faults_before
    # Answers still on their way when the last delivery became final land in a moment: wait until
    # the devices' counts stop moving (bounded: 10 quiet polls, at most 120 s).
    after, quiet, settle = received(), 0, time.time()
    while quiet < 10 and time.time() - settle < 120:
        time.sleep(0.2)
        again = received()
        quiet = quiet + 1 if again == after else 0
        after = again
    copies = {t: after.get(t, 0) - before.get(t, 0) for t in tokens}
    lost = sum(1 for c in copies.values() if c == 0)
    duplicates = sum(c - 1 for c in copies.values() if c > 1)
    worst_token, worst = max(copies.items(), key=lambda item: item[1])
    twice = sum(1 for c in copies.values() if c > 1)
    # The inbox check: copies of this notification (its nonce) in one device's inbox. Only a
    # device that received it twice or more can hold two copies, so only those are read.
    inbox_worst, inbox_multi = (1 if n else 0), 0
    for token, count in copies.items():
        if count < 2: continue
        inbox = must(control.call("GET", f"/v1/devices/{token}/inbox"), "inbox")["notifications"]
        held = sum(1 for item in inbox if nonce in json.dumps(item.get("payload")))
        inbox_worst = max(inbox_worst, held)
        if held > 1: inbox_multi += 1
    rows.append((DESCRIBE[mix], dict(counts=counts, finished=finished, faults=faults, lost=lost, duplicates=duplicates,
                                     worst=worst, worst_token=worst_token[:8], twice=twice, inbox_worst=inbox_worst,
                                     inbox_multi=inbox_multi, drop=drop, attempts=attempts(nid),
                                     unknown=unknown_outcomes() - unknown_before), None))
    log(f"mix {mix}: {counts} in {finished if finished is not None else 'TIMEOUT'} s, {faults} faults, lost {lost}, duplicates {duplicates}")

print(f"\nfault soak: {os.environ['BUILD']} herald, {n:,} devices, one broadcast per mix\n")
print("| mix | faults injected | sent / failed | lost | duplicates (devices) | worst device (copies) | time to finish | inbox: most copies (inboxes with 2+) | attempts: deliveries | in flight at drops | goals |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
for describe, r, refused in rows:
    if r is None:
        print(f"| {describe} | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a: send refused ({refused[:60]}) |")
        continue
    goals = []
    goals.append("0 lost" if r["lost"] == 0 else f"LOST {r['lost']}")
    if "drop" in describe or "connection" in describe:
        goals.append("≤2 copies" if r["worst"] <= 2 else f"WORST {r['worst']}")
        goals.append("duplicates ≤ in flight" if r["duplicates"] <= r["unknown"] else f"DUPLICATES {r['duplicates']} > {r['unknown']} in flight")
    if r["drop"]:
        goals.append("0 duplicates" if r["duplicates"] == 0 else f"DUPLICATES {r['duplicates']}")
    if r["finished"] is None: goals.append(f"NOT FINAL after {soak_timeout:.0f} s")
    if r["faults"] == 0 and r["attempts"] != f"1:{n}": goals.append(f"ATTEMPTS {r['attempts']} with no fault")
    counts = r["counts"]
    finished = "timeout" if r["finished"] is None else f"{r['finished']:.1f} s"
    print(f"| {describe} | {r['faults']} | {counts.get('sent', 0):,} / {counts.get('failed', 0):,} | {r['lost']} | "
          f"{r['duplicates']} ({r['twice']}) | {r['worst']} ({r['worst_token']}…) | {finished} | "
          f"{r['inbox_worst']} ({r['inbox_multi']}) | {r['attempts']} | {r['unknown']} | {', '.join(goals)} |")
PY
