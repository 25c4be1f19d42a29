#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Herald's Web Push encryption (RFC 8291 aes128gcm) against OpenSSL's P-256 ECDH, on one core
# each, in the same run: `herald-bench webpush-encrypt` encrypts a typical ~300-octet payload N
# times for distinct subscriptions; `openssl speed ecdhp256` measures ECDH operations alone. One
# encryption is one P-256 key generation, one ECDH, the HKDF chain and AES-128-GCM, so the ratio
# (Herald's CPU µs per message over OpenSSL's µs per ECDH) cannot go below 1; the goal is ≤ 1.5.
# Not a test: nothing here fails on a number.
#
#   Benchmarks/webpush-crypto-bench.sh          # N=20000 RUNS=3 SECONDS_OPENSSL=3
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-20000}
RUNS=${RUNS:-3}
SECONDS_OPENSSL=${SECONDS_OPENSSL:-3}
log() { printf '== %s\n' "$*" >&2; }
command -v openssl >/dev/null || { echo "openssl is needed" >&2; exit 1; }
cd "$ROOT"
log "swift build -c release --product herald-bench (waits for other Swift builds)"
flock /tmp/herald-swift-build.lock swift build -c release --product herald-bench 2>&1 | tail -n 1 >&2
BENCH=$ROOT/.build/release/herald-bench
log "$(openssl version)"

echo "run,openssl_ecdh_per_s,openssl_us_per_ecdh,herald_messages_per_s,herald_cpu_us_per_message,ratio"
for run in $(seq "$RUNS"); do
  # "ECDH op" table row: "256 bits ecdh (nistp256)   0.0000s   25000.0" (op/s last).
  ops=$(openssl speed -seconds "$SECONDS_OPENSSL" ecdhp256 2>/dev/null | awk '/ecdh \(nistp256\)/ { v = $NF } END { print v }')
  [[ -n $ops ]] || { echo "could not read openssl speed's ecdhp256 result" >&2; exit 1; }
  result=$("$BENCH" webpush-encrypt --count "$N")
  log "$result"
  rate=$(sed -E 's/.* rate=([0-9.]+).*/\1/' <<<"$result")
  cpu=$(sed -E 's/.* cpu_us_per_message=([0-9.]+).*/\1/' <<<"$result")
  python3 -c "
ops, rate, cpu = float('$ops'), float('$rate'), float('$cpu')
print(f'$run,{ops:.0f},{1e6 / ops:.2f},{rate:.0f},{cpu:.2f},{cpu / (1e6 / ops):.2f}')"
done
