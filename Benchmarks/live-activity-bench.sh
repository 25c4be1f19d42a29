#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Updating FANOUT (100,000) Live Activities, two ways, through release `herald serve` on SQLite
# against the APNs emulator, in the same run:
#   1. per token: one send with pushType liveactivity to FANOUT update tokens (inserted straight
#      into the database), timed from the API call until the emulator has accepted FANOUT
#      requests (its counters): requests/s at the emulator. The reference is the raw APNs client
#      (herald-bench, the same liveactivity payload and topic, 1000 in flight) against the same
#      emulator: raw, herald, raw, herald (ABAB), best of each.
#   2. by broadcast: one channel made through the API, FANOUT emulator devices subscribed to it,
#      and `audience: {"channel"}` sent three times, each timed from the API call until the
#      emulator's counters show the broadcast delivered to all FANOUT subscribers; and (first,
#      before the emulator holds any device) three times on a channel nobody subscribed to, until
#      the API answers: Herald's own share.
# Prints both figures and the ratios. Not a test: nothing fails on a number. Uses the release
# binaries already built (`swift build -c release --product herald` and `--product herald-bench`);
# builds nothing.
#
#   flock -o /tmp/herald-swift.lock Benchmarks/live-activity-bench.sh      # FANOUT=100000
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/.build-bench/live-activity}
FANOUT=${FANOUT:-100000}
EMU_PORT=${EMU_PORT:-18490}
CONTROL_PORT=${CONTROL_PORT:-18491}
API_PORT=${API_PORT:-18492}
HERALD=${HERALD:-$ROOT/.build/release/herald}
BENCH=${BENCH:-$ROOT/.build/release/herald-bench}
for binary in "$HERALD" "$BENCH"; do
  [[ -x $binary ]] || { echo "no $binary: build it first (swift build -c release --product herald / herald-bench)" >&2; exit 2; }
done
# shellcheck source=Benchmarks/emulated.sh
source "$ROOT/Benchmarks/emulated.sh"
start_emulated_serve sqlite3 curl python3 openssl

# The Live Activity update both sides send (the raw client reads it from a file).
printf '{"aps":{"timestamp":%s,"event":"update","content-state":{"score":3,"minute":71}}}' "$(date +%s)" > "$WORK/update.json"

raw_client() {
  (cd "$WORK" && "$BENCH" --port "$EMU_PORT" -n "$FANOUT" -c 1000 --ca-file emulator/ca.pem --key-file AuthKey.p8 \
    --topic com.example.app.push-type.liveactivity --push-type liveactivity --payload-file update.json | sed -n 's/.*rate=\([0-9]*\).*/\1/p')
}

python3 - "$API_PORT" "$CONTROL_PORT" "$ADMIN" "$WORK" "$FANOUT" <<'PY' &
import http.client, json, os, sqlite3, sys, threading, time
api_port, control_port, admin, work, fanout = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
def call(port, method, path, body=None, headers=None, connection=None):
    c = connection or http.client.HTTPConnection("127.0.0.1", port)
    c.request(method, path, json.dumps(body) if body is not None else None, {"content-type": "application/json", **(headers or {})})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
def api(method, path, body=None): return call(api_port, method, path, body, {"authorization": "Bearer " + admin})
def counters(): return call(control_port, "GET", "/v1/counters")
api("POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
api("PUT", "/v1/apps/bench/credentials/sandbox", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
db = sqlite3.connect(work + "/data/herald.sqlite")
now = int(time.time() * 1000)
db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at, activity_id) values ('bench', ?, 'liveactivity', 'development', 1, ?, ?, ?)",
               ((os.urandom(32).hex(), now, now, f"match-{i % 1000}") for i in range(fanout)))
db.commit()
update = json.load(open(work + "/update.json"))
# Herald's own share of a broadcast: on a channel nobody subscribed to, before the emulator holds
# any device (its delivery scans them all), until the API answers: the API call, one request to
# the emulator, the record.
empty = api("POST", "/v1/apps/bench/channels", {"environment": "sandbox"})["id"]
empties = []
# An untimed first one opens the app's device-push connection (channel management has its own).
api("POST", "/v1/apps/bench/notifications", {"audience": {"channel": empty}, "aps": update["aps"]})
for _ in range(3):
    start = time.time()
    api("POST", "/v1/apps/bench/notifications", {"audience": {"channel": empty}, "aps": update["aps"]})
    empties.append(time.time() - start)
# The channel and its subscribers: made before anything else is timed.
channel = api("POST", "/v1/apps/bench/channels", {"environment": "sandbox"})["id"]
def subscribe(count):
    c = http.client.HTTPConnection("127.0.0.1", control_port)
    for _ in range(count):
        token = call(control_port, "POST", "/v1/devices", {"bundleId": "com.example.app", "environment": "development", "kind": "liveactivity"}, connection=c)["token"]
        call(control_port, "POST", f"/v1/devices/{token}/channels", {"channelId": channel}, connection=c)
workers = [threading.Thread(target=subscribe, args=(fanout // 8 + (1 if i < fanout % 8 else 0),)) for i in range(8)]
[w.start() for w in workers]; [w.join() for w in workers]
print(f"ready: {fanout} update tokens in herald, {fanout} emulator devices subscribed to channel {channel}", file=sys.stderr, flush=True)
open(work + "/channel", "w").write(channel + "\n")
def wait_idle():
    while db.execute("select (select count(*) from (select 1 from deliveries where state='pending' limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)").fetchone()[0] > 0:
        time.sleep(0.05)
# Two per-token runs, each after one of the shell's raw runs: it touches sh-rawN when its run is
# done, and we py-heraldN when ours is.
def handshake(word):
    open(work + "/py-" + word, "w").close()
for run in (1, 2):
    while not os.path.exists(f"{work}/sh-raw{run}"): time.sleep(0.05)
    base = counters()["acceptedForUnknownTokens"]
    start = time.time()
    api("POST", "/v1/apps/bench/notifications", {"audience": "all", "kinds": ["liveactivity"], "pushType": "liveactivity", "aps": update["aps"]})
    while counters()["acceptedForUnknownTokens"] - base < fanout: time.sleep(0.02)
    seconds = time.time() - start
    wait_idle()
    open(f"{work}/herald{run}", "w").write(f"{fanout / seconds:.0f} {seconds:.3f}\n")
    handshake(f"herald{run}")
# Three broadcasts, each until the emulator has delivered it to every subscriber.
times = []
for _ in range(3):
    base = counters()["delivered"]
    start = time.time()
    api("POST", "/v1/apps/bench/notifications", {"audience": {"channel": channel}, "aps": update["aps"]})
    while counters()["delivered"] - base < fanout: time.sleep(0.005)
    times.append(time.time() - start)
open(work + "/broadcast", "w").write(" ".join(f"{t:.4f}" for t in times + empties) + "\n")
PY
PY_PID=$!
pids+=("$PY_PID")
rm -f "$WORK"/sh-* "$WORK"/py-*
raws=()
for run in 1 2; do
  # The first raw run waits until the setup is done, so nothing else loads the machine.
  while [[ ! -s $WORK/channel ]]; do kill -0 "$PY_PID" 2>/dev/null || { echo "setup failed" >&2; exit 1; }; sleep 0.2; done
  raws+=("$(raw_client)")
  touch "$WORK/sh-raw$run"
  while [[ ! -e $WORK/py-herald$run ]]; do kill -0 "$PY_PID" 2>/dev/null || { echo "the herald run failed" >&2; exit 1; }; sleep 0.2; done
done
wait "$PY_PID"
read -r H1 S1 < "$WORK/herald1"
read -r H2 S2 < "$WORK/herald2"
read -r B1 B2 B3 E1 E2 E3 < "$WORK/broadcast"
python3 - "$FANOUT" "${raws[0]}" "${raws[1]}" "$H1" "$S1" "$H2" "$S2" "$B1" "$B2" "$B3" "$E1" "$E2" "$E3" <<'PY'
import sys
fanout = int(sys.argv[1])
raws, heralds, seconds = [int(sys.argv[2]), int(sys.argv[3])], [int(sys.argv[4]), int(sys.argv[6])], [float(sys.argv[5]), float(sys.argv[7])]
broadcasts = sorted(float(x) for x in sys.argv[8:11])
empties = sorted(float(x) for x in sys.argv[11:14])
print(f"raw client (herald-bench → emulator, liveactivity): {raws[0]:,} and {raws[1]:,} req/s; best {max(raws):,}")
print(f"herald, {fanout:,} update tokens, one send:           {heralds[0]:,} and {heralds[1]:,} req/s at the emulator ({seconds[0]:.2f} s, {seconds[1]:.2f} s); best {max(heralds):,}")
print(f"herald / raw client (best of each):                   {max(heralds) / max(raws):.3f}")
print(f"one broadcast to {fanout:,} channel subscribers:        {', '.join(f'{b * 1000:.0f}' for b in broadcasts)} ms; median {broadcasts[1] * 1000:.0f} ms")
print(f"the same broadcast, a channel without subscribers:   {', '.join(f'{b * 1000:.1f}' for b in empties)} ms; median {empties[1] * 1000:.1f} ms (herald's share)")
print(f"per token (best) / broadcast (median), time to update all {fanout:,}: {min(seconds) / broadcasts[1]:.1f}x")
PY
