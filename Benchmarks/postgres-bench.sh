#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# herald serve on SQLite, on PostgreSQL with one process and with two processes sharing the
# database, in one run, against ../shared/bench's apns-sink, beside the raw APNs client
# (herald-bench) measured in the same run:
#   1. sustained sends through the API: BATCHES notifications of 1000 tokens (four posting
#      connections, spread over the processes), with p50/p99 from accept to sent;
#   2. a broadcast to FANOUT devices (inserted straight into the database), time to finish;
#   and each process's peak RSS.
# PostgreSQL runs from Debian's packages (scripts/postgres-test-server) with fsync on and
# synchronous_commit off, the counterpart of SQLite's WAL with synchronous=NORMAL, and 1 GB of
# shared buffers (PG_SHARED_BUFFERS), room for a 1M broadcast's deliveries and their indexes.
# Not a test: nothing fails on a number.
#
#   Benchmarks/postgres-bench.sh        # BATCHES=100 FANOUT=1000000 CONFIGS="sqlite postgres-1 postgres-2" POLL=0.2
#   PERF=1 profiles the first herald process during the broadcast (PERF=postgres: PostgreSQL's processes;
#   PERF_PHASE=sends: during the sends instead); PGSTAT=1 prints PostgreSQL's time per statement.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench/postgres
BATCHES=${BATCHES:-100}
FANOUT=${FANOUT:-1000000}
SINK_PORT=${SINK_PORT:-18470}
API_PORT=${API_PORT:-18471}
# The server runs as the postgres user: its folder is in /tmp, which that user can reach.
export HERALD_PG_DIR=/tmp/herald-bench-postgres HERALD_PG_PORT=${PG_PORT:-25440}
export HERALD_PG_OPTIONS="-c synchronous_commit=off -c shared_buffers=${PG_SHARED_BUFFERS:-1GB} -c max_wal_size=4GB${PG_EXTRA:+ $PG_EXTRA}${PGSTAT:+ -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on}"
rm -rf "$WORK" && mkdir -p "$WORK"
source "$ROOT/Benchmarks/common.sh"
bench_setup postgresql
cleanup() {
  cleanup_processes
  "$ROOT/scripts/postgres-test-server" stop 2>/dev/null || true
  rm -rf "$HERALD_PG_DIR"
}
trap cleanup EXIT
rm -rf "$HERALD_PG_DIR"
PG_URL=$("$ROOT/scripts/postgres-test-server" start)
# The collation Herald recommends (docs/server.md): byte order, no locale rules on its keys.
for db in herald1 herald2; do psql "$PG_URL" -qc "CREATE DATABASE $db TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"; done
start_sink
measure_raw_client

# One configuration: NAME DATABASE PROCESSES. Starts the processes, runs the Python driver,
# stops them; the driver prints one table row.
run() {
  local name=$1 database=$2 processes=$3 ports=() spids=()
  log "$name"
  # The previous configuration's dirty pages are written out first, not during this one.
  sync
  mkdir -p "$WORK/$name"
  printf '%s' "$(openssl rand -hex 32)" > "$WORK/$name/master.key"
  for i in $(seq "$processes"); do
    local port=$((API_PORT + i)) logfile="$WORK/$name/serve-$i.log"
    "$HERALD" serve --port "$port" --no-emulator --data-dir "$WORK/$name" ${database:+--database "$database"} \
      --apns-host 127.0.0.1 --apns-port "$SINK_PORT" --apns-ca-file "$WORK/sink.crt" --log-level "${LOG_LEVEL:-warning}" > "$logfile" 2>&1 &
    spids+=($!)
    pids+=($!)
    for _ in $(seq 300); do grep -q "Herald listening" "$logfile" && break; sleep 0.1; done
    ports+=("$port")
  done
  local admin
  admin=$(grep -h -A1 "Admin API key" "$WORK/$name"/serve-*.log | tail -n 1 | tr -d ' ')
  python3 "$WORK/driver.py" "$name" "${database:-$WORK/$name/herald.sqlite}" "$admin" "$WORK" "$BATCHES" "$FANOUT" "$RAW" \
    "$(IFS=,; echo "${ports[*]}")" "$(IFS=,; echo "${spids[*]}")" >> "$WORK/table.md"
  # SIGTERM, then up to 30 s to exit; one that does not is reported and killed.
  for pid in "${spids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${spids[@]}"; do
    for _ in $(seq 300); do
      case $(ps -o stat= -p "$pid" 2>/dev/null) in ""|Z*) break ;; esac
      sleep 0.1
    done
    case $(ps -o stat= -p "$pid" 2>/dev/null) in
      ""|Z*) ;;
      *) log "herald $pid did not exit within 30 s of SIGTERM: killed"; kill -9 "$pid" 2>/dev/null || true ;;
    esac
    wait "$pid" 2>/dev/null || true
  done
}

cat > "$WORK/driver.py" <<'PY'
import http.client, json, os, sqlite3, subprocess, sys, threading, time
name, database, admin, work, batches, fanout, raw = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7] or 0)
ports = [int(p) for p in sys.argv[8].split(",")]
pids = [int(p) for p in sys.argv[9].split(",")]
postgres = database.startswith("postgres")
def sql(query):
    """One query's rows, straight from the database (psql for PostgreSQL)."""
    if postgres:
        out = subprocess.run(["psql", database, "-qAtF", "\t", "-c", query], check=True, capture_output=True, text=True).stdout
        return [line.split("\t") for line in out.splitlines() if line]
    db = sqlite3.connect(database); rows = db.execute(query).fetchall(); db.close(); return rows
def peak_rss():
    peaks = []
    for pid in pids:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM"): peaks.append(int(line.split()[1]) // 1024)
    return "/".join(map(str, peaks))
def call(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None, {"authorization": "Bearer " + admin, "content-type": "application/json"})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
c = http.client.HTTPConnection("127.0.0.1", ports[0])
call(c, "POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
call(c, "PUT", "/v1/apps/bench/credentials/production", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
def insert_devices(count):
    now = int(time.time() * 1000)
    tokens = [os.urandom(32).hex() for _ in range(count)]
    if postgres:
        path = f"{work}/{name}/devices.csv"
        with open(path, "w") as f:
            for t in tokens: f.write(f"bench,{t},device,production,true,{now},{now}\n")
        subprocess.run(["psql", database, "-qc", f"\\copy devices (app_id, token, kind, environment, active, created_at, last_registered_at) from '{path}' csv"], check=True)
        subprocess.run(["psql", database, "-qc", "ANALYZE"], check=True)
    else:
        db = sqlite3.connect(database)
        db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at) values ('bench', ?, 'device', 'production', 1, ?, ?)",
                       ((t, now, now) for t in tokens))
        db.commit(); db.close()
    return tokens
def wait_idle():
    while int(sql("select (select count(*) from (select 1 from deliveries where state='pending' and next_attempt_at >= 0 limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)")[0][0]) > 0:
        time.sleep(float(os.environ.get("POLL", "0.2")))
tokens = insert_devices(20000)
def cpu_seconds():
    """CPU seconds used so far by every herald, postgres, apns-sink and python3 (this driver) process, by command."""
    used = {}
    for entry in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            comm = open(f"/proc/{entry}/comm").read().strip()
        except (OSError, IndexError):
            continue
        if comm in ("herald", "postgres", "apns-sink", "python3"):
            seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            used[comm] = used.get(comm, 0) + seconds
            if comm == "postgres":
                # PostgreSQL's own processes by role (their titles), every connection as "backends".
                title = open(f"/proc/{entry}/cmdline").read().replace("\0", " ")
                role = next((r for r in ("autovacuum", "walwriter", "checkpointer", "background writer", "logical replication") if r in title), "backends")
                used["postgres " + role] = used.get("postgres " + role, 0) + seconds
    return used
def report_cpu(phase, seconds, before, after):
    used = ", ".join(f"{comm} {after.get(comm, 0) - before.get(comm, 0):.1f} s" for comm in ("herald", "postgres", "apns-sink", "python3"))
    print(f"{name}: CPU during {phase} ({seconds:.1f} s on 2 cores): {used}", file=sys.stderr)
    if postgres:
        roles = sorted(k for k in after if k.startswith("postgres "))
        print("  postgres by role: " + ", ".join(f"{k[9:]} {after[k] - before.get(k, 0):.1f} s" for k in roles), file=sys.stderr)
# PERF=1: a perf profile of the (first) herald process during the broadcast (PERF_PHASE=sends:
# during the sends through the API). PERF=postgres: of every PostgreSQL process instead.
def pgstat_reset():
    if postgres and os.environ.get("PGSTAT"):
        sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); sql("SELECT pg_stat_statements_reset()")
def pgstat_report(phase):
    """PGSTAT=1: where PostgreSQL's time went during a phase, by statement."""
    if not (postgres and os.environ.get("PGSTAT")):
        return
    print(f"{name}: PostgreSQL statements during {phase}", file=sys.stderr)
    for calls, total, plan, query in sql("SELECT calls, round(total_exec_time), round(total_plan_time), left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 12"):
        print(f"  {total:>7} ms + {plan:>5} ms planning {calls:>6} calls  {query}", file=sys.stderr)
def start_profiler(phase):
    if not os.environ.get("PERF") or os.environ.get("PERF_PHASE", "broadcast") != phase:
        return None
    profiled = subprocess.run(["pgrep", "-d,", "-x", "postgres"], capture_output=True, text=True).stdout.strip() if os.environ.get("PERF") == "postgres" else str(pids[0])
    graph = [] if os.environ.get("PERF") == "postgres" else ["-g", "--call-graph", "dwarf,16384"]
    if os.environ.get("PERF") == "postgres" and os.environ.get("PERF_GRAPH"):
        graph = ["-g", "--call-graph", "dwarf,8192"]
    return subprocess.Popen(["perf", "record", "-F", "499", *graph, "-p", profiled, "-o", f"{work}/{name}/perf.data"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def stop_profiler(profiler):
    if profiler:
        profiler.send_signal(2); profiler.wait()
# 1. sustained sends of 1000 tokens each, four posting connections spread over the processes
def poster(port, batch_numbers):
    w = http.client.HTTPConnection("127.0.0.1", port)
    for b in batch_numbers:
        chunk = [tokens[(b * 1000 + k) % len(tokens)] for k in range(1000)]
        call(w, "POST", "/v1/apps/bench/notifications", {"audience": {"tokens": chunk}, "title": "bench", "body": "x"})
posters = [threading.Thread(target=poster, args=(ports[i % len(ports)], range(i, batches, 4))) for i in range(4)]
profiler = start_profiler("sends")
pgstat_reset()
cpu_before = cpu_seconds()
start = time.time(); [t.start() for t in posters]; [t.join() for t in posters]
wait_idle()
stop_profiler(profiler)
report_cpu("the sends", time.time() - start, cpu_before, cpu_seconds())
pgstat_report("the sends")
send_rate = batches * 1000 / (time.time() - start)
lat = sorted(int(r[0]) for r in sql("select d.updated_at - n.created_at from deliveries d join notifications n on n.id = d.notification_id where d.state='sent'"))
p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]
# 2. fan-out to FANOUT devices
insert_devices(fanout - len(tokens))
pgstat_reset()
profiler = start_profiler("broadcast")
cpu_before = cpu_seconds()
start = time.time()
call(c, "POST", "/v1/apps/bench/notifications", {"audience": "all", "title": "everyone", "body": "x"})
accepted = time.time() - start
wait_idle()
fan = time.time() - start
cpu_after = cpu_seconds()
stop_profiler(profiler)
report_cpu("the broadcast", fan, cpu_before, cpu_after)
pgstat_report("the broadcast")
failed = sql("select count(*) from deliveries where state='failed'")[0][0]
print(f"| {name} | {send_rate:,.0f}/s = {send_rate / raw:.2f}× | {p50} / {p99} ms | {fan:.1f} s ({accepted:.1f} s to 202) = {fanout / fan / raw:.2f}× | {peak_rss()} MiB | {failed} |")
PY

printf '| store | sends via API (%s × 1000 tokens), × raw | accept → sent p50 / p99 | broadcast to %s devices, × raw | peak RSS per process | failed |\n|---|---:|---:|---:|---:|---:|\n' \
  "$BATCHES" "$FANOUT" > "$WORK/table.md"
for config in ${CONFIGS:-sqlite postgres-1 postgres-2}; do
  case $config in
    sqlite) run sqlite "" 1 ;;
    postgres-1) run postgres-1 "${PG_URL%/postgres*}/herald1?sslmode=disable" 1 ;;
    postgres-2) run postgres-2 "${PG_URL%/postgres*}/herald2?sslmode=disable" 2 ;;
  esac
done
printf '\nraw APNs client (herald-bench, 1 connection, median of 3): %s notif/s\n\n' "$RAW"
cat "$WORK/table.md"
