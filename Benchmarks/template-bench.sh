#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Templates' cost on the send path: a broadcast to FANOUT devices (1,000,000) of release
# `herald serve` on SQLite to the APNs emulator (`--accept-unknown-tokens`), sent plainly and by
# a template with three locales (pt-BR, pt, en, and the default), in the same run: plain,
# template, plain, template (ABAB, so neither side gets only the warm or the cold run). The
# devices' locales are a quarter each pt-BR, pt-PT, en-US and de (the default's), so every
# variant is used. Each broadcast is timed from the API's 202 to the last delivery recorded.
# Not a test: nothing fails on a number. Uses the release binary already built
# (`swift build -c release --product herald`); builds nothing.
#
#   flock -o /tmp/herald-swift.lock Benchmarks/template-bench.sh      # FANOUT=1000000
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/.build-bench/template}
FANOUT=${FANOUT:-1000000}
EMU_PORT=${EMU_PORT:-18480}
CONTROL_PORT=${CONTROL_PORT:-18481}
API_PORT=${API_PORT:-18482}
HERALD=${HERALD:-$ROOT/.build/release/herald}
[[ -x $HERALD ]] || { echo "no $HERALD: build it first (swift build -c release --product herald)" >&2; exit 2; }
# shellcheck source=Benchmarks/emulated.sh
source "$ROOT/Benchmarks/emulated.sh"
start_emulated_serve sqlite3 curl python3 openssl

python3 - "$API_PORT" "$ADMIN" "$WORK" "$FANOUT" <<'PY'
import http.client, json, os, sqlite3, sys, time
port, admin, work, fanout = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
def call(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request(method, path, json.dumps(body) if body is not None else None, {"authorization": "Bearer " + admin, "content-type": "application/json"})
    r = c.getresponse(); text = r.read()
    if r.status >= 300: sys.exit(f"{method} {path}: {r.status} {text[:200]}")
    return json.loads(text) if text else None
call("POST", "/v1/apps", {"id": "bench", "bundleId": "com.example.app"})
call("PUT", "/v1/apps/bench/credentials/sandbox", {"keyId": "TEST123456", "teamId": "TEAMID1234", "privateKey": open(work + "/AuthKey.p8").read()})
template = call("POST", "/v1/apps/bench/templates", {
    "name": "Shipped", "default": {"title": "Order {{order}} shipped", "body": "Hi {{name}}, it is on its way"},
    "locales": {"pt-BR": {"title": "Pedido {{order}} enviado", "body": "Oi {{name}}, está a caminho"},
                "pt": {"title": "Encomenda {{order}} enviada", "body": "Olá {{name}}, vai a caminho"},
                "en": {"title": "Order {{order}} is on its way", "body": "Hi {{name}}"}}})["id"]
db = sqlite3.connect(work + "/data/herald.sqlite")
now = int(time.time() * 1000)
locales = ["pt-BR", "pt-PT", "en-US", "de"]
db.executemany("insert into devices (app_id, token, kind, environment, active, created_at, last_registered_at, locale) values ('bench', ?, 'device', 'development', 1, ?, ?, ?)",
               ((os.urandom(32).hex(), now, now, locales[i % 4]) for i in range(fanout)))
db.commit()
def wait_idle():
    while db.execute("select (select count(*) from (select 1 from deliveries where state='pending' limit 1) p) + (select count(*) from (select 1 from notifications where expand_after is not null limit 1) e) + (select count(*) from (select 1 from delivery_chunks limit 1) c)").fetchone()[0] > 0:
        time.sleep(0.05)
plain = {"audience": "all", "title": "Order A-7 shipped", "body": "Hi Ana, it is on its way"}
templated = {"audience": "all", "template": template, "data": {"order": "A-7", "name": "Ana"}}
results = []
for name, body in (("plain", plain), ("template", templated), ("plain", plain), ("template", templated)):
    start = time.time()
    nid = call("POST", "/v1/apps/bench/notifications", body)["id"]
    wait_idle()
    seconds = time.time() - start
    sent = db.execute("select count(*) from deliveries where notification_id = ? and state = 'sent'", (nid,)).fetchone()[0]
    results.append((name, seconds, sent))
    print(f"{name:9} {seconds:6.1f} s  {sent} sent  {sent / seconds:,.0f} notif/s", flush=True)
best = {n: min(s for m, s, _ in results if m == n) for n in ("plain", "template")}
mean = {n: sum(s for m, s, _ in results if m == n) / 2 for n in ("plain", "template")}
print(f"template / plain: best {best['template'] / best['plain']:.3f}, mean {mean['template'] / mean['plain']:.3f}")
PY
