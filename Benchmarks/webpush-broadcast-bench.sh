#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A broadcast to N browsers through the Web Push emulator against the same broadcast to N APNs
# tokens through the APNs emulator, in the same run, through release `herald serve` on SQLite:
#   1. N virtual browsers made by the Web Push emulator (`POST /emulator/browsers` with `count`,
#      10,000 a request; each holds its own P-256 key pair and auth secret, subscribed with the
#      app's VAPID key from `GET /v1/apps/bench/webpush/key`), their subscriptions registered
#      through the API (`POST /v1/apps/bench/registrations`, transport webpush) with tag "web";
#      N random APNs tokens registered through the API (`PUT /v1/apps/bench/devices/{token}`,
#      sandbox) with tag "apns", which the APNs emulator takes with `--accept-unknown-tokens`;
#   2. RUNS times, alternating: one notification to tag "web", then the same to tag "apns", each
#      timed from the API call until every delivery is recorded (nothing pending, no audience
#      left to expand, no chunk in flight: read from the database by a WAL reader, which never
#      holds up herald's writer, every 0.05 s, so the wait does not load the API it measures);
#      then the notification's counts through the API (`GET …/notifications/{id}`) and the
#      emulators' counters, which must show all N sent and delivered.
# Both emulators run in one `herald emulator` process apart from `herald serve` (`--no-emulator`,
# the Web Push emulator's origin allowed with `--webpush-origin`), so herald's CPU per message
# (/proc/<pid>/stat before and after) is herald's alone; the emulator's is printed beside it.
# For the web, the emulator checks every request's VAPID signature (an ECDSA verification) and
# decrypts every message (an ECDH, HKDF, AES-GCM) into the browser's inbox; for APNs it checks
# the provider token (cached) and counts. Both processes, this script and anything else running
# share the machine's cores: the busy cores of each are printed too.
# Prints messages/s for each broadcast, the ratio web / APNs per run and of the medians, and a
# RESULT line. PERF=1: `perf record` of herald and of the emulator during the first web broadcast
# (perf-herald.data, perf-emulator.data in the work folder; that run's figures are perturbed).
# Not a test: nothing fails on a number (a broadcast that does not deliver all N stops the run).
# Uses the release binary already built (`swift build -c release --product herald`); builds
# nothing. On 2 cores the defaults take about 4 minutes (a web broadcast of 100,000 ~45 s).
#
#   Benchmarks/webpush-broadcast-bench.sh        # N=100000 RUNS=3 PERSONALITY=apple
#   PERF=1 N=20000 RUNS=1 Benchmarks/webpush-broadcast-bench.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/.build-bench/webpush-broadcast}
N=${N:-100000}
RUNS=${RUNS:-3}
# Which push service the virtual browsers' endpoints answer like: apple, mozilla or fcm.
PERSONALITY=${PERSONALITY:-apple}
# Processes registering through the API at once (one keep-alive connection each).
REGISTER_WORKERS=${REGISTER_WORKERS:-4}
# Seconds one broadcast may take before the run gives up.
BROADCAST_TIMEOUT=${BROADCAST_TIMEOUT:-1800}
EMU_PORT=${EMU_PORT:-18510}
CONTROL_PORT=${CONTROL_PORT:-18511}
WEBPUSH_PORT=${WEBPUSH_PORT:-18512}
API_PORT=${API_PORT:-18513}
HERALD=${HERALD:-$ROOT/.build/release/herald}
log() { printf '== %s\n' "$*" >&2; }
[[ -x $HERALD ]] || { echo "no $HERALD: build it first (swift build -c release --product herald)" >&2; exit 2; }
for tool in curl python3 openssl; do command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 2; }; done
for port in "$EMU_PORT" "$CONTROL_PORT" "$WEBPUSH_PORT" "$API_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "port $port is in use: pick others (EMU_PORT, CONTROL_PORT, WEBPUSH_PORT, API_PORT)" >&2; exit 2; fi
done
rm -rf "$WORK" && mkdir -p "$WORK"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8" 2>/dev/null
MASTER=$(openssl rand -hex 32)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

log "herald emulator (APNs on $EMU_PORT, accepting unknown tokens; Web Push on $WEBPUSH_PORT)"
"$HERALD" emulator --host 127.0.0.1 --port "$EMU_PORT" --no-production --no-fcm --control-port "$CONTROL_PORT" \
  --webpush-port "$WEBPUSH_PORT" --data-dir "$WORK/emulator" --key-file "$WORK/AuthKey.p8" --key-id TEST123456 --team-id TEAMID1234 \
  --accept-unknown-tokens --log-level warning > "$WORK/emulator.log" 2>&1 &
EMULATOR_PID=$!
pids+=("$EMULATOR_PID")
for _ in $(seq 300); do
  [[ -s $WORK/emulator/ca.pem ]] && curl -fsS "http://127.0.0.1:$WEBPUSH_PORT/emulator/health" >/dev/null 2>&1 && break
  kill -0 "$EMULATOR_PID" 2>/dev/null || { cat "$WORK/emulator.log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$WEBPUSH_PORT/emulator/health" >/dev/null || { cat "$WORK/emulator.log" >&2; exit 1; }

log "herald serve on $API_PORT (no built-in emulator; the Web Push emulator's origin allowed)"
HERALD_MASTER_KEY=$MASTER "$HERALD" serve --port "$API_PORT" --no-emulator --no-dashboard --data-dir "$WORK/data" \
  --apns-host 127.0.0.1 --apns-port "$EMU_PORT" --apns-ca-file "$WORK/emulator/ca.pem" \
  --webpush-origin "http://127.0.0.1:$WEBPUSH_PORT" --no-rate-limits --log-level warning > "$WORK/serve.log" 2>&1 &
SERVE_PID=$!
pids+=("$SERVE_PID")
for _ in $(seq 300); do
  grep -q "Herald listening" "$WORK/serve.log" && break
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
  sleep 0.1
done
grep -q "Herald listening" "$WORK/serve.log" || { cat "$WORK/serve.log" >&2; exit 1; }
ADMIN=$(grep -A1 "Admin API key" "$WORK/serve.log" | tail -n 1 | tr -d ' ')

python3 - "$API_PORT" "$CONTROL_PORT" "$WEBPUSH_PORT" "$ADMIN" "$WORK" "$N" "$RUNS" "$PERSONALITY" "$REGISTER_WORKERS" \
  "$BROADCAST_TIMEOUT" "$SERVE_PID" "$EMULATOR_PID" <<'PY'
import http.client, json, multiprocessing, os, signal, sqlite3, statistics, subprocess, sys, time
(api_port, control_port, webpush_port, admin, work, n, runs, personality, register_workers, timeout, serve_pid,
 emulator_pid) = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6]),
                  int(sys.argv[7]), sys.argv[8], int(sys.argv[9]), float(sys.argv[10]), int(sys.argv[11]), int(sys.argv[12]))
def log(text): print("== " + text, file=sys.stderr, flush=True)
def call(port, method, path, body=None, key=admin, connection=None):
    c = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"content-type": "application/json"}
    if key: headers["authorization"] = "Bearer " + key
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse(); text = r.read()
    # An exception, not sys.exit: a registering worker's error reaches the parent through the pool.
    if r.status >= 300: raise RuntimeError(f"{method} {path}: {r.status} {text[:300]}")
    return json.loads(text) if text else None
def api(method, path, body=None, connection=None): return call(api_port, method, path, body, connection=connection)
def web_counters(): return call(webpush_port, "GET", "/emulator/counters", key=None)
def apns_counters(): return call(control_port, "GET", "/v1/counters", key=None)
def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
def machine():
    # (busy, total) jiffies of all cores, from /proc/stat's first line (idle and iowait are idle).
    values = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return sum(values) - values[3] - values[4], sum(values)
def own_cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
def peak_rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"): return int(line.split()[1]) // 1024
    return 0

api("POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
api("PUT", "/v1/apps/bench/credentials/sandbox", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
vapid = api("GET", "/v1/apps/bench/webpush/key")["publicKey"]

# 1. N virtual browsers, 10,000 a request, and N APNs tokens.
start = time.time()
subscriptions = []
while len(subscriptions) < n:
    count = min(10_000, n - len(subscriptions))
    made = call(webpush_port, "POST", "/emulator/browsers", {"personality": personality, "applicationServerKey": vapid, "count": count}, key=None)
    subscriptions += [b["subscription"] for b in made["browsers"]]
log(f"{n:,} virtual browsers ({personality}) made in {time.time() - start:.1f} s")
tokens = [os.urandom(32).hex() for _ in range(n)]

def register(job):
    kind, items = job
    c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=600)
    for item in items:
        if kind == "web":
            api("POST", "/v1/apps/bench/registrations",
                {"transport": "webpush", "subscription": {"endpoint": item["endpoint"], "keys": item["keys"]}, "tags": ["web"]}, connection=c)
        else:
            api("PUT", "/v1/apps/bench/devices/" + item, {"environment": "sandbox", "tags": ["apns"]}, connection=c)
    return len(items)
registration_rates = {}
with multiprocessing.get_context("fork").Pool(register_workers) as pool:
    for kind, items in (("web", subscriptions), ("apns", tokens)):
        start = time.time()
        done = sum(pool.map(register, [(kind, items[i::register_workers]) for i in range(register_workers)]))
        registration_rates[kind] = done / (time.time() - start)
        log(f"{done:,} {kind} registrations through the API: {registration_rates[kind]:,.0f}/s")
del subscriptions, tokens

db = sqlite3.connect(work + "/data/herald.sqlite")
def idle():
    return db.execute("select (select count(*) from (select 1 from deliveries where state='pending' limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)").fetchone()[0] == 0

# 2. The broadcasts, alternating.
results = []
for run in range(1, runs + 1):
    for kind in ("web", "apns"):
        emulator_before = web_counters()["delivered"] if kind == "web" else apns_counters()["acceptedForUnknownTokens"]
        profilers = [subprocess.Popen(["perf", "record", "-F", "499", "-g", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", f"{work}/perf-{name}.data"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for name, pid in (("herald", serve_pid), ("emulator", emulator_pid))] if os.environ.get("PERF") and run == 1 and kind == "web" else []
        if profilers: time.sleep(1)
        herald_cpu, emulator_cpu, mine, (busy, total) = cpu_seconds(serve_pid), cpu_seconds(emulator_pid), own_cpu(), machine()
        # A new connection each time: one kept from the last broadcast may have sat idle past
        # herald's idle timeout (60 s).
        c = http.client.HTTPConnection("127.0.0.1", api_port, timeout=600)
        c.connect()
        start = time.time()
        answer = api("POST", "/v1/apps/bench/notifications", {"audience": {"tags": [kind]}, "title": "Bench", "body": "A broadcast"}, connection=c)
        accepted = time.time() - start
        while not idle():
            if time.time() - start > timeout: sys.exit(f"run {run} {kind}: not finished after {timeout:.0f} s")
            time.sleep(0.05)
        seconds = time.time() - start
        for profiler in profilers: profiler.send_signal(signal.SIGINT)
        for profiler in profilers: profiler.wait()
        herald_cpu, emulator_cpu, mine = cpu_seconds(serve_pid) - herald_cpu, cpu_seconds(emulator_pid) - emulator_cpu, own_cpu() - mine
        busy2, total2 = machine()
        cores = (busy2 - busy) / (total2 - total) * os.cpu_count()
        counts = api("GET", f"/v1/apps/bench/notifications/{answer['id']}")["counts"]
        emulator_after = web_counters()["delivered"] if kind == "web" else apns_counters()["acceptedForUnknownTokens"]
        row = {"run": run, "kind": kind, "seconds": seconds, "accepted": accepted, "rate": n / seconds, "sent": counts["sent"],
               "failed": counts["failed"], "pending": counts["pending"], "emulator": emulator_after - emulator_before,
               "herald_us": herald_cpu / n * 1e6, "emulator_us": emulator_cpu / n * 1e6, "herald_cores": herald_cpu / seconds,
               "emulator_cores": emulator_cpu / seconds, "other_cores": max(0.0, cores - (herald_cpu + emulator_cpu + mine) / seconds)}
        results.append(row)
        log(f"run {run} {kind}: {seconds:.2f} s, {row['rate']:,.0f}/s, sent {counts['sent']:,}, failed {counts['failed']}, "
            f"emulator {row['emulator']:,}, herald {row['herald_us']:.1f} µs/msg, emulator {row['emulator_us']:.1f} µs/msg")
        if counts["sent"] != n or row["emulator"] < n:
            sys.exit(f"run {run} {kind}: {counts} and {row['emulator']} at the emulator, not {n} sent")
        if row["emulator"] > n: log(f"run {run} {kind}: {row['emulator'] - n} messages reached the emulator twice (resent)")
failures = web_counters()["decryptionFailures"]

def median(kind, field): return statistics.median(r[field] for r in results if r["kind"] == kind)
web, apns = median("web", "rate"), median("apns", "rate")
print(f"\nN={n:,} per broadcast, {runs} runs, browsers as {personality}; herald serve and herald emulator as two processes on {os.cpu_count()} cores")
print(f"registration through the API ({register_workers} processes): web {registration_rates['web']:,.0f}/s, APNs {registration_rates['apns']:,.0f}/s\n")
print("| run | broadcast | 202 after | all recorded after | messages/s | web / APNs | herald CPU µs/msg | emulator CPU µs/msg | cores: herald / emulator / others |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for r in results:
    ratio = ""
    if r["kind"] == "web":
        pair = next(x for x in results if x["run"] == r["run"] and x["kind"] == "apns")
        ratio = f"{r['rate'] / pair['rate']:.3f}×"
    print(f"| {r['run']} | {'web (Web Push)' if r['kind'] == 'web' else 'APNs'} | {r['accepted'] * 1000:.0f} ms | {r['seconds']:.2f} s | {r['rate']:,.0f} | {ratio} | "
          f"{r['herald_us']:.1f} | {r['emulator_us']:.1f} | {r['herald_cores']:.2f} / {r['emulator_cores']:.2f} / {r['other_cores']:.2f} |")
print(f"\nmedian messages/s: web {web:,.0f}, APNs {apns:,.0f}; web / APNs {web / apns:.3f}×")
print(f"median herald CPU per message: web {median('web', 'herald_us'):.1f} µs, APNs {median('apns', 'herald_us'):.1f} µs "
      f"({median('web', 'herald_us') / median('apns', 'herald_us'):.2f}×)")
print(f"median emulator CPU per message: Web Push emulator {median('web', 'emulator_us'):.1f} µs, APNs emulator {median('apns', 'emulator_us'):.1f} µs")
print(f"decryption failures at the Web Push emulator: {failures}; peak RSS: herald {peak_rss(serve_pid)} MiB, emulator {peak_rss(emulator_pid)} MiB")
print(f"RESULT n={n} web_rate={web:.0f} apns_rate={apns:.0f} ratio={web / apns:.3f} web_herald_us={median('web', 'herald_us'):.1f} "
      f"apns_herald_us={median('apns', 'herald_us'):.1f} web_emulator_us={median('web', 'emulator_us'):.1f} apns_emulator_us={median('apns', 'emulator_us'):.1f}")
PY
