#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Receipts: how many device reports (`POST /v1/apps/{app}/receipts`, batches of 500) release
# `herald serve` on SQLite accepts per second, measured with wrk (Debian's) and a Lua script,
# with `GET /livez` measured by the same wrk in the same run as the API's own ceiling.
#   1. FANOUT devices straight into the database, then a broadcast to the APNs emulator
#      (`herald emulator --accept-unknown-tokens`), twice: once with the app's receipts off
#      (the payload as encoded once) and once on (each device's receipt id spliced in), so the
#      cost of the splice and its HMAC is known;
#   2. the receipt ids of the second broadcast's deliveries, computed as Herald does
#      (HKDF-SHA256 of the master key, HMAC-SHA256 over app id and delivery id) into request
#      bodies of 500: first every delivery's "received", then every one's "opened";
#   3. wrk posts them for DURATION seconds (CONNECTIONS connections, 2 threads): receipts/s
#      accepted = what the database counts applied (received + opened) over the run.
# Not a test: nothing fails on a number. Uses the release binary already built
# (`swift build -c release --product herald`); builds nothing.
#
#   Benchmarks/receipts-bench.sh        # FANOUT=200000 DURATION=10 CONNECTIONS=8
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/.build-bench/receipts}
FANOUT=${FANOUT:-200000}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-8}
EMU_PORT=${EMU_PORT:-18470}
CONTROL_PORT=${CONTROL_PORT:-18471}
API_PORT=${API_PORT:-18472}
HERALD=${HERALD:-$ROOT/.build/release/herald}
log() { printf '== %s\n' "$*" >&2; }
[[ -x $HERALD ]] || { echo "no $HERALD: build it first (swift build -c release --product herald)" >&2; exit 2; }
# shellcheck source=Benchmarks/emulated.sh
source "$ROOT/Benchmarks/emulated.sh"
start_emulated_serve wrk sqlite3 curl python3 openssl

python3 - "$API_PORT" "$ADMIN" "$WORK" "$FANOUT" "$MASTER" <<'PY'
import base64, hashlib, hmac, http.client, json, os, sqlite3, struct, sys, time
port, admin, work, fanout, master = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), bytes.fromhex(sys.argv[5])
def call(method, path, body=None, key=admin):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request(method, path, json.dumps(body) if body is not None else None, {"authorization": "Bearer " + key, "content-type": "application/json"})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
call("POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
call("PUT", "/v1/apps/bench/credentials/sandbox", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
key = call("POST", "/v1/keys", {"scope": "register", "appId": "bench"})["key"]
open(work + "/register.key", "w").write(key)
db = sqlite3.connect(work + "/data/herald.sqlite")
now = int(time.time() * 1000)
db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at) values ('bench', ?, 'device', 'development', 1, ?, ?)",
               ((os.urandom(32).hex(), now, now) for _ in range(fanout)))
db.commit()
def wait_idle():
    while db.execute("select (select count(*) from (select 1 from deliveries where state='pending' limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)").fetchone()[0] > 0:
        time.sleep(0.05)
times = {}
for receipts in (False, True):
    call("PATCH", "/v1/apps/bench", {"receipts": receipts})
    start = time.time()
    nid = call("POST", "/v1/apps/bench/notifications", {"audience": "all", "title": "everyone", "body": "x"})["id"]
    wait_idle()
    times[receipts] = time.time() - start
sent = db.execute("select count(*) from deliveries where notification_id = ? and state = 'sent'", (nid,)).fetchone()[0]
open(work + "/broadcast.txt", "w").write(f"{times[False]:.1f} {times[True]:.1f} {sent} {nid}\n")
# Herald's receipt ids: HKDF-SHA256 (no salt) of the master key for "herald receipt id v1",
# HMAC-SHA256 over app id, a zero byte and the delivery id (8 bytes, big-endian), 12 bytes kept.
prk = hmac.new(b"\0" * 32, master, hashlib.sha256).digest()
okm = hmac.new(prk, b"herald receipt id v1" + b"\x01", hashlib.sha256).digest()
def receipt(delivery):
    raw = struct.pack(">q", delivery)
    return base64.urlsafe_b64encode(raw + hmac.new(okm, b"bench\0" + raw, hashlib.sha256).digest()[:12]).rstrip(b"=").decode()
ids = [r[0] for r in db.execute("select id from deliveries where notification_id = ? order by id", (nid,))]
items = [{"receipt": receipt(i), "event": "received"} for i in ids] + [{"receipt": receipt(i), "event": "opened"} for i in ids]
with open(work + "/bodies.lua", "w") as out:
    out.write("bodies = {\n")
    for start in range(0, len(items), 500):
        out.write("[[" + json.dumps({"receipts": items[start:start + 500]}, separators=(",", ":")) + "]],\n")
    out.write("}\n")
# One check through the API before the run: the ids are Herald's.
check = call("POST", "/v1/apps/bench/receipts", {"receipts": [{"receipt": receipt(ids[0]), "event": "received", "at": 1}]}, key=key)
if check["refused"]: sys.exit(f"receipt ids do not verify: {check}")
db.execute("update deliveries set received_at = null where id = ?", (ids[0],))
db.execute("update notifications set received_count = 0 where id = ?", (nid,))
db.commit()
PY
read -r OFF ON SENT NID < "$WORK/broadcast.txt"
KEY=$(cat "$WORK/register.key")

cat > "$WORK/receipts.lua" <<LUA
dofile("$WORK/bodies.lua")
local counter = 0
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  counter = id
end
wrk.method = "POST"
wrk.headers["authorization"] = "Bearer $KEY"
wrk.headers["content-type"] = "application/json"
request = function()
  -- Two threads take alternate bodies: each batch is posted once (until the list wraps).
  local body = bodies[(counter % #bodies) + 1]
  counter = counter + 2
  return wrk.format(nil, "/v1/apps/bench/receipts", nil, body)
end
LUA
cat > "$WORK/livez.lua" <<LUA
wrk.headers["authorization"] = "Bearer $KEY"
LUA

log "GET /livez, ${DURATION}s"
wrk -t 2 -c "$CONNECTIONS" -d "${DURATION}s" -s "$WORK/livez.lua" "http://127.0.0.1:$API_PORT/livez" > "$WORK/livez.txt"
log "POST receipts, ${DURATION}s"
wrk -t 2 -c "$CONNECTIONS" -d "${DURATION}s" --latency -s "$WORK/receipts.lua" "http://127.0.0.1:$API_PORT/v1/apps/bench/receipts" > "$WORK/receipts.txt"
APPLIED=$(sqlite3 "$WORK/data/herald.sqlite" "select received_count + opened_count from notifications where id = '$NID'")
LIVEZ=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$WORK/livez.txt")
BATCHES=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$WORK/receipts.txt")
P50=$(awk '$1 == "50%" {print $2}' "$WORK/receipts.txt")
P99=$(awk '$1 == "99%" {print $2}' "$WORK/receipts.txt")
ERRORS=$(grep -E "Non-2xx|Socket errors" "$WORK/receipts.txt" || true)
RSS=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$SERVE_PID/status")
python3 - "$LIVEZ" "$BATCHES" "$APPLIED" "$DURATION" "$P50" "$P99" "$OFF" "$ON" "$SENT" "$FANOUT" "$RSS" "$CONNECTIONS" "$ERRORS" <<'PY'
import sys
livez, batches, applied, duration, p50, p99, off, on, sent, fanout, rss, connections, errors = sys.argv[1:14]
livez, batches, applied, duration, off, on = float(livez), float(batches), int(applied), float(duration), float(off), float(on)
print(f"\n| measure | result | beside |\n|---|---:|---|")
print(f"| GET /livez (wrk, {connections} connections) | {livez:,.0f} req/s | the API's ceiling |")
print(f"| POST receipts, batches of 500 (wrk, {connections} connections) | {batches:,.0f} batches/s = {batches * 500:,.0f} receipts/s posted | {batches / livez:.3f}× /livez in requests |")
print(f"| receipts accepted (applied in the database) | {applied / duration:,.0f} receipts/s | goal ≥ 20,000 |")
print(f"| batch latency p50 / p99 | {p50} / {p99} | |")
print(f"| broadcast to {int(fanout):,} devices (emulator), receipts off / on | {off:.1f} s / {on:.1f} s | {int(fanout) / off:,.0f} / {int(fanout) / on:,.0f} notif/s |")
print(f"| deliveries sent (receipts on) | {int(sent):,} | |")
print(f"| herald peak RSS | {rss} MiB | |")
if errors: print(f"\nwrk: {errors}")
PY
