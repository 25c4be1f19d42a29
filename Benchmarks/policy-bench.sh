#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The cost of a delivery policy on the hot path: in one run per store, a broadcast to FANOUT
# devices (inserted straight into the database) without any policy, then the same broadcast with
# a frequency cap active for every device (each device a person of its own, a cap it never
# reaches: every delivery is counted, none refused), against ../shared/bench's apns-sink.
# Uses the release herald already built (HERALD, default .build/release/herald): build it first
# (swift build -c release --product herald). Not a test: nothing fails on a number.
#
#   Benchmarks/policy-bench.sh        # FANOUT=1000000 CONFIGS="sqlite postgres" CAP_FIRST= (1: the capped broadcast first)
#   PER_USER=k: every device has a user, k devices each (default: none has one).
#   Each broadcast starts from an empty deliveries table; KEEP=1: the second runs over the first's rows.
#   PGSTAT=1: PostgreSQL's time per statement during each broadcast. PERF=1: a perf profile of
#   herald during the capped broadcast (PERF=postgres: of PostgreSQL's processes), perf.data in
#   the store's work folder (PERF_GRAPH=1: with call graphs). The CPU each process used during each broadcast goes to stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench/policy
FANOUT=${FANOUT:-1000000}
SINK_PORT=${SINK_PORT:-18480}
API_PORT=${API_PORT:-18481}
HERALD=${HERALD:-$ROOT/.build/release/herald}
export HERALD_PG_DIR=/tmp/herald-policy-bench HERALD_PG_PORT=${PG_PORT:-25448}
export HERALD_PG_OPTIONS="-c synchronous_commit=off -c shared_buffers=${PG_SHARED_BUFFERS:-1GB} -c max_wal_size=4GB${PGSTAT:+ -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on}"
rm -rf "$WORK" && mkdir -p "$WORK"
log() { printf '== %s\n' "$*" >&2; }
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true
  "$ROOT/scripts/postgres-test-server" stop 2>/dev/null || true
  rm -rf "$HERALD_PG_DIR"
}
trap cleanup EXIT
SINK=$ROOT/.build-bench/apns-sink
[[ -x $SINK ]] || gcc -O2 -o "$SINK" "$BENCH_DIR/server/apns-sink.c" -lnghttp2 -lssl -lcrypto -lpthread
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/sink.key" -out "$WORK/sink.crt" \
  -days 30 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/AuthKey.p8" 2>/dev/null
"$SINK" --port "$SINK_PORT" --cert "$WORK/sink.crt" --key "$WORK/sink.key" --threads 1 --max-streams 1000 --max-seconds 3600 > "$WORK/sink.log" 2>&1 &
pids+=($!)

cat > "$WORK/driver.py" <<'PY'
import http.client, json, os, sqlite3, subprocess, sys, time
name, database, admin, work, fanout, port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
postgres = database.startswith("postgres")
def sql(query):
    if postgres:
        out = subprocess.run(["psql", database, "-qAtF", "\t", "-c", query], check=True, capture_output=True, text=True).stdout
        return [line.split("\t") for line in out.splitlines() if line]
    db = sqlite3.connect(database); rows = db.execute(query).fetchall(); db.commit(); db.close(); return rows
def call(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None, {"authorization": "Bearer " + admin, "content-type": "application/json"})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
c = http.client.HTTPConnection("127.0.0.1", port)
call(c, "POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
call(c, "PUT", "/v1/apps/bench/credentials/production", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
now = int(time.time() * 1000)
tokens = [os.urandom(32).hex() for _ in range(fanout)]
# PER_USER=k: each user has k consecutive devices (a person, and a counts row, per user); unset
# or 0: no device has a user (each a person of its own, 64 of them to a counts row).
per_user = int(os.environ.get("PER_USER") or 0)
def user(i): return f"user{i // per_user}" if per_user else None
if postgres:
    path = f"{work}/{name}/devices.csv"
    with open(path, "w") as f:
        for i, t in enumerate(tokens): f.write(f"bench,{t},device,production,true,{now},{now},{user(i) or ''}\n")
    subprocess.run(["psql", database, "-qc", f"\\copy devices (app_id, token, kind, environment, active, created_at, last_registered_at, user_id) from '{path}' csv"], check=True)
    subprocess.run(["psql", database, "-qc", "ANALYZE"], check=True)
else:
    db = sqlite3.connect(database)
    db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at, user_id) values ('bench', ?, 'device', 'production', 1, ?, ?, ?)",
                   ((t, now, now, user(i)) for i, t in enumerate(tokens)))
    db.commit(); db.close()
def wait_idle():
    while int(sql("select (select count(*) from (select 1 from deliveries where state='pending' limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)")[0][0]) > 0:
        time.sleep(0.2)
def cpu_seconds():
    """CPU seconds used so far by this run's herald and PostgreSQL (its postmaster and children)."""
    postmaster = open(os.environ["HERALD_PG_DIR"] + "/postmaster.pid").readline().strip() if postgres else None
    used = {}
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        comm = "herald" if entry == os.environ["HERALD_PID"] else "postgres" if postmaster in (entry, fields[1]) else None
        if comm:
            used[comm] = used.get(comm, 0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used
def broadcast(profile=False):
    if postgres and os.environ.get("PGSTAT"):
        sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); sql("SELECT pg_stat_statements_reset()")
    profiler = None
    if profile and os.environ.get("PERF"):
        target = subprocess.run(["pgrep", "-d,", "-P", open(os.environ["HERALD_PG_DIR"] + "/postmaster.pid").readline().strip()], capture_output=True, text=True).stdout.strip() if os.environ["PERF"] == "postgres" else os.environ["HERALD_PID"]
        graph = ["-g"] if os.environ.get("PERF_GRAPH") else []
        profiler = subprocess.Popen(["perf", "record", "-F", "499", *graph, "-p", target, "-o", f"{work}/{name}/perf.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = cpu_seconds()
    start = time.time()
    call(c, "POST", "/v1/apps/bench/notifications", {"audience": "all", "title": "everyone", "body": "x"})
    wait_idle()
    seconds = time.time() - start
    after = cpu_seconds()
    if profiler:
        profiler.send_signal(2); profiler.wait()
    print(f"{name}{' (capped)' if profile else ''}: {seconds:.1f} s, CPU " + ", ".join(f"{k} {after.get(k, 0) - before.get(k, 0):.1f} s" for k in ("herald", "postgres")), file=sys.stderr)
    if postgres and os.environ.get("PGSTAT"):
        for calls, total, plan, query in sql("SELECT calls, round(total_exec_time), round(total_plan_time), left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 14"):
            print(f"  {total:>7} ms + {plan:>5} ms planning {calls:>6} calls  {query}", file=sys.stderr)
    return seconds
def empty_deliveries():
    """The deliveries of the broadcast before, gone: each broadcast starts from the same empty
    table. (Over the first's million rows, the second broadcast's COPY alone took 14.3 s of
    statement time against 7.9 s, which the cap was charged for.) KEEP=1 keeps them."""
    if os.environ.get("KEEP"): return
    if postgres: sql("TRUNCATE deliveries, delivery_chunks")
    else: sql("DELETE FROM deliveries"); sql("VACUUM")  # no free pages for the next to reuse: a fresh file's state
failed = None
def with_cap():
    global failed
    call(c, "PATCH", "/v1/apps/bench", {"frequencyCap": {"limit": 100, "windowSeconds": 86400}})
    seconds = broadcast(profile=True)
    failed = sql("select count(*) from deliveries where state='failed'")[0][0]
    call(c, "PATCH", "/v1/apps/bench", {"frequencyCap": {}})
    return seconds
# CAP_FIRST=1 swaps the order.
if os.environ.get("CAP_FIRST"):
    capped = with_cap(); empty_deliveries(); plain = broadcast()
else:
    plain = broadcast(); empty_deliveries(); capped = with_cap()
# A user's row counts one person; a row of devices without a user, each of them (`id:times;…`).
counted, rows = sql("select sum(case when substr(subject, 1, 2) = 'b:' then length(times) - length(replace(times, ';', '')) + 1 else 1 end), count(*) from frequency_counts")[0]
print(f"| {name}{' (cap first)' if os.environ.get('CAP_FIRST') else ''}{' (kept rows)' if os.environ.get('KEEP') else ''} | {plain:.1f} s ({fanout / plain:,.0f}/s) | {capped:.1f} s ({fanout / capped:,.0f}/s) | {(capped / plain - 1) * 100:+.0f}% | {counted} ({rows} rows) | {failed} |")
PY

run() {
  local name=$1 database=$2 port=$API_PORT
  log "$name"
  sync
  mkdir -p "$WORK/$name"
  printf '%s' "$(openssl rand -hex 32)" > "$WORK/$name/master.key"
  "$HERALD" serve --port "$port" --no-emulator --data-dir "$WORK/$name" ${database:+--database "$database"} \
    --apns-host 127.0.0.1 --apns-port "$SINK_PORT" --apns-ca-file "$WORK/sink.crt" --log-level warning > "$WORK/$name/serve.log" 2>&1 &
  local pid=$!
  pids+=($pid)
  for _ in $(seq 300); do grep -q "Herald listening" "$WORK/$name/serve.log" && break; sleep 0.1; done
  local admin
  admin=$(grep -h -A1 "Admin API key" "$WORK/$name/serve.log" | tail -n 1 | tr -d ' ')
  HERALD_PID=$pid python3 "$WORK/driver.py" "$name" "${database:-$WORK/$name/herald.sqlite}" "$admin" "$WORK" "$FANOUT" "$port" >> "$WORK/table.md"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

printf '| store | broadcast to %s devices, no policy | the same with a frequency cap for every device | cap vs none | people counted (rows) | failed |\n|---|---:|---:|---:|---:|---:|\n' "$FANOUT" > "$WORK/table.md"
for config in ${CONFIGS:-sqlite postgres}; do
  case $config in
    sqlite) run sqlite "" ;;
    postgres)
      rm -rf "$HERALD_PG_DIR"
      PG_URL=$("$ROOT/scripts/postgres-test-server" start)
      psql "$PG_URL" -qc "CREATE DATABASE herald TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
      run postgres "${PG_URL%/postgres*}/herald?sslmode=disable" ;;
  esac
done
cat "$WORK/table.md"
