#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Herald's FCM client against h2load, both sending FCM HTTP v1 messages to the same FCM
# emulator's messages:send (one service account, one device) in the same run: the ratio is the
# client's rate over h2load's. h2load speaks HTTP/1.1 to the emulator (which serves HTTP/1.1),
# with C connections; Herald's client uses its AsyncHTTPClient pool (C in flight). Not a test:
# nothing here fails on a number.
#
#   Benchmarks/fcm-client-bench.sh              # N=20000 C=64 RUNS=3
#   EMULATOR_BUILD=release Benchmarks/fcm-client-bench.sh   # the emulator built for release too
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-20000}
C=${C:-64}
RUNS=${RUNS:-3}
EMULATOR_BUILD=${EMULATOR_BUILD:-debug}
WORK=$ROOT/.build-bench/fcm
log() { printf '== %s\n' "$*" >&2; }
command -v h2load >/dev/null || { echo "h2load (nghttp2-client) is needed" >&2; exit 1; }
mkdir -p "$WORK"
cd "$ROOT"
log "swift build -c release --product herald-bench"
swift build -c release --product herald-bench 2>&1 | tail -n 1 >&2
if [[ $EMULATOR_BUILD == release ]]; then
  swift build -c release --product herald 2>&1 | tail -n 1 >&2
else
  swift build --product herald 2>&1 | tail -n 1 >&2
fi
HERALD=$ROOT/.build/$EMULATOR_BUILD/herald
BENCH=$ROOT/.build/release/herald-bench

"$HERALD" emulator --port 0 --no-production --control-port 0 --fcm-port 0 --webpush-port 0 --data-dir "$WORK/emulator" --log-level info \
  > "$WORK/emulator.log" 2>&1 &
EMULATOR=$!
trap 'kill $EMULATOR 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "FCM emulator listening" "$WORK/emulator.log" && break; sleep 0.1; done
PORT=$(grep "FCM emulator listening" "$WORK/emulator.log" | sed -E 's/.*emulator.port=([0-9]+).*/\1/')
BASE=http://127.0.0.1:$PORT
curl -fsS -X POST "$BASE/emulator/service-accounts" -d '{"projectId":"bench"}' > "$WORK/account.json"
TOKEN=$(curl -fsS -X POST "$BASE/emulator/devices" -d '{"projectId":"bench"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
# h2load's bearer: a token the emulator issued for the same account (python signs the grant).
ACCESS=$(python3 - "$WORK/account.json" <<'EOF'
import json, sys, time, base64, subprocess, urllib.request, urllib.parse
account = json.load(open(sys.argv[1]))
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
now = int(time.time())
header = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": account["private_key_id"]}).encode())
claims = b64(json.dumps({"iss": account["client_email"], "scope": "https://www.googleapis.com/auth/firebase.messaging",
                         "aud": "https://oauth2.googleapis.com/token", "iat": now, "exp": now + 3600}).encode())
open("/tmp/fcm-bench-key.pem", "w").write(account["private_key"])
signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "/tmp/fcm-bench-key.pem"], input=f"{header}.{claims}".encode(),
                           capture_output=True, check=True).stdout
body = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": f"{header}.{claims}.{b64(signature)}"})
print(json.load(urllib.request.urlopen(account["token_uri"], body.encode()))["access_token"])
EOF
)
rm -f /tmp/fcm-bench-key.pem
BODY=$WORK/body.json
printf '{"message":{"token":"%s","notification":{"title":"Bench","body":"A push"},"data":{"n":"1"}}}' "$TOKEN" > "$BODY"
URL="$BASE/v1/projects/bench/messages:send"

echo "run,h2load_rps,herald_rps,ratio"
for run in $(seq "$RUNS"); do
  h2=$(h2load --h1 -n "$N" -c "$C" -m 1 -d "$BODY" -H "authorization: Bearer $ACCESS" -H "content-type: application/json" "$URL" \
    | awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($i ~ /req\/s/) { gsub(",", "", $(i-1)); print $(i-1) } }')
  herald=$("$BENCH" --port 0 -n "$N" -c "$C" --fcm-endpoint "$BASE" --service-account "$WORK/account.json" --token "$TOKEN" \
    | sed -E 's/.*rate=([0-9]+).*/\1/')
  ratio=$(python3 -c "print(f'{$herald / $h2:.2f}')")
  echo "$run,$h2,$herald,$ratio"
done
