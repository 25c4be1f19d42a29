#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# herald serve end to end on this machine, SQLite, against ../shared/bench's apns-sink (a C
# HTTP/2 sink), beside the raw APNs client (herald-bench) measured in the same run:
#   1. registration rate through the API (one keep-alive connection per worker);
#   2. sustained send rate through the API in notifications of 1000 tokens each (four backend
#      connections posting at once), with p50/p99
#      from accept (notification committed) to sent (delivery recorded); then the same sends
#      paced at half that rate, with their own p50/p99;
#   3. a broadcast to FANOUT devices (inserted straight into the database: registering a million
#      through the API is measured by 1. already): time to finish and herald's peak RSS.
# Not a test: nothing fails on a number.
#
#   Benchmarks/serve-bench.sh        # REGISTER=20000 BATCHES=300 FANOUT=1000000
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench/serve
REGISTER=${REGISTER:-20000}
BATCHES=${BATCHES:-300}
FANOUT=${FANOUT:-1000000}
SINK_PORT=${SINK_PORT:-18460}
API_PORT=${API_PORT:-18461}
rm -rf "$WORK" && mkdir -p "$WORK"
source "$ROOT/Benchmarks/common.sh"
bench_setup sqlite3
trap cleanup_processes EXIT
start_sink
"$HERALD" serve --port "$API_PORT" --no-emulator --data-dir "$WORK/data" --apns-host 127.0.0.1 --apns-port "$SINK_PORT" \
  --apns-ca-file "$WORK/sink.crt" --log-level warning > "$WORK/serve.log" 2>&1 &
SERVE_PID=$!
pids+=($SERVE_PID)
for _ in $(seq 100); do grep -q "Herald listening" "$WORK/serve.log" && break; sleep 0.1; done
ADMIN=$(grep -A1 "Admin API key" "$WORK/serve.log" | tail -n 1 | tr -d ' ')

measure_raw_client

python3 - "$API_PORT" "$ADMIN" "$WORK" "$REGISTER" "$BATCHES" "$FANOUT" "$SERVE_PID" "$RAW" <<'PY'
import http.client, json, os, sqlite3, sys, threading, time, uuid
port, admin, work, register, batches, fanout, pid, raw = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8] or 0)
def cpu_seconds():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
def peak_rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"): return int(line.split()[1]) // 1024
    return 0
def connect():
    return http.client.HTTPConnection("127.0.0.1", port)
def call(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None, {"authorization": "Bearer " + admin, "content-type": "application/json"})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
c = connect()
call(c, "POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
call(c, "PUT", "/v1/apps/bench/credentials/production", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
# 1. registration
tokens = [os.urandom(32).hex() for _ in range(register)]
def worker(chunk):
    w = connect()
    for t in chunk: call(w, "PUT", "/v1/apps/bench/devices/" + t, {"environment": "production"})
threads = [threading.Thread(target=worker, args=(tokens[i::4],)) for i in range(4)]
start = time.time(); [t.start() for t in threads]; [t.join() for t in threads]
reg_rate = register / (time.time() - start)
rss_registered = peak_rss()
def wait_idle():
    # Reads the database directly (a WAL reader never blocks Herald's writer) every 0.05 s, so
    # the measurement does not load the API it measures.
    db = sqlite3.connect(work + "/data/herald.sqlite")
    # Pending deliveries, audiences not yet expanded, or chunks in flight.
    while db.execute("select (select count(*) from (select 1 from deliveries where state='pending' and next_attempt_at >= 0 limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)").fetchone()[0] > 0:
        time.sleep(0.05)
    db.close()
# 2. sustained sends of 1000 tokens each
# Four backend connections post at once, as a backend with a few workers would.
def poster(batch_numbers):
    w = connect()
    for b in batch_numbers:
        chunk = [tokens[(b * 1000 + k) % register] for k in range(1000)]
        call(w, "POST", "/v1/apps/bench/notifications", {"audience": {"tokens": chunk}, "title": "bench", "body": "x"})
posters = [threading.Thread(target=poster, args=(range(i, batches, 4),)) for i in range(4)]
# PERF=1: a perf profile of herald during the sends (perf.data in the work folder).
import signal, subprocess
profiler = subprocess.Popen(["perf", "record", "-F", "999", "-g", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", work + "/perf.data"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if os.environ.get("PERF") else None
cpu_before = cpu_seconds()
start = time.time(); [t.start() for t in posters]; [t.join() for t in posters]
wait_idle()
if profiler:
    profiler.send_signal(signal.SIGINT); profiler.wait()
elapsed = time.time() - start
send_cpu = (cpu_seconds() - cpu_before) / (batches * 1000) * 1e6
send_rate = batches * 1000 / elapsed
db = sqlite3.connect(work + "/data/herald.sqlite")
lat = sorted(r[0] for r in db.execute(
    "select d.updated_at - n.created_at from deliveries d join notifications n on n.id = d.notification_id where d.state='sent'"))
p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]
# 2b. The same sends paced at half the rate just measured (each poster keeps its own schedule):
# the time from accept to sent that a provider sees below its ceiling, not a queue's length.
paced_rate = send_rate / 2
paced_batches = max(8, batches // 2)
paced_ids, paced_lock = [], threading.Lock()
def paced_poster(i, batch_numbers, t0, interval):
    w = connect()
    for k, b in enumerate(batch_numbers):
        delay = t0 + (i / 4 + k) * interval - time.time()
        if delay > 0: time.sleep(delay)
        chunk = [tokens[(b * 1000 + k2) % register] for k2 in range(1000)]
        answer = call(w, "POST", "/v1/apps/bench/notifications", {"audience": {"tokens": chunk}, "title": "paced", "body": "x"})
        with paced_lock: paced_ids.append(answer["id"])
t0 = time.time() + 0.2
pacers = [threading.Thread(target=paced_poster, args=(i, range(i, paced_batches, 4), t0, 4 * 1000 / paced_rate)) for i in range(4)]
[t.start() for t in pacers]; [t.join() for t in pacers]
wait_idle()
db.execute("create temp table paced (id text primary key)")
db.executemany("insert into paced values (?)", ((i,) for i in paced_ids))
paced_lat = sorted(r[0] for r in db.execute(
    "select d.updated_at - n.created_at from deliveries d join notifications n on n.id = d.notification_id join paced p on p.id = n.id where d.state='sent'"))
paced_p50, paced_p99 = paced_lat[len(paced_lat) // 2], paced_lat[int(len(paced_lat) * 0.99)]
failed = db.execute("select count(*) from deliveries where state='failed'").fetchone()[0]
rss_sends = peak_rss()
# 3. fan-out: FANOUT devices straight into the table, then one broadcast
now = int(time.time() * 1000)
db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at) values ('bench', ?, 'device', 'production', 1, ?, ?)",
               ((os.urandom(32).hex(), now, now) for _ in range(fanout - register)))
db.commit(); db.close()
# A new connection: the first one has been idle longer than herald's idle timeout (60 s).
c = connect()
start = time.time()
bid = call(c, "POST", "/v1/apps/bench/notifications", {"audience": "all", "title": "everyone", "body": "x"})
accepted = time.time() - start
wait_idle()
fan = time.time() - start
rss = peak_rss()
print(f"\n| measure | result | beside |\n|---|---:|---|")
print(f"| raw APNs client (herald-bench, 1 connection, median of 3) | {raw:,} notif/s | reference |")
print(f"| registration through the API (4 keep-alive clients) | {reg_rate:,.0f} devices/s | |")
print(f"| sends through the API, {batches} × 1000 tokens, 4 posting connections | {send_rate:,.0f} notif/s | {send_rate / raw:.2f}× raw client |" if raw else "")
print(f"| herald's CPU per notification sent through the API | {send_cpu:.1f} µs | |")
print(f"| accept → sent, p50 / p99 | {p50} ms / {p99} ms | |")
print(f"| the same paced at half that rate, {paced_batches} × 1000 tokens: accept → sent, p50 / p99 | {paced_p50} ms / {paced_p99} ms | {paced_rate:,.0f} notif/s |")
print(f"| broadcast to {fanout:,} devices: 202 after | {accepted:.1f} s | |")
print(f"| broadcast to {fanout:,} devices: all sent after | {fan:.1f} s | {fanout / fan:,.0f} notif/s = {fanout / fan / raw:.2f}× raw |" if raw else "")
print(f"| herald peak RSS (after registration / sends / broadcast) | {rss_registered} / {rss_sends} / {rss} MiB | |")
print(f"| failed deliveries | {failed} | |")
PY
