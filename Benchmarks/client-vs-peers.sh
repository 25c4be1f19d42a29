#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Herald's APNs client against the peer benchmark harness (../shared/bench): h2load's ceiling,
# the AsyncHTTPClient baseline and aioapns, all in the same run of its run-peers.sh, against its
# apns-sink. Herald joins as two custom peers: one connection and four. Not a test: nothing
# here fails on a number.
#
#   Benchmarks/client-vs-peers.sh                     # N=100000 RUNS=3 CONC=1000, every peer
#   PEERS="" Benchmarks/client-vs-peers.sh            # h2load and Herald only (no 10-minute peer build)
#
# The harness directory is read-only here, so it is copied to .build-bench/peers and set up
# there (apt packages, certificates, the aioapns venv, the ahc-baseline release build).
# Env: everything run-peers.sh takes (N, RUNS, CONC, PEERS, H2LOAD_CASES, ...), BENCH_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
WORK=$ROOT/.build-bench/peers
log() { printf '== %s\n' "$*" >&2; }

mkdir -p "$WORK"
# Copy the harness (not its results or build products), keeping what setup.sh made before.
(cd "$BENCH_DIR" && tar --exclude=./results --exclude=./.peers --exclude='*/.build' -cf - .) | (cd "$WORK" && tar -xf -)
chmod -R u+w "$WORK"
PEERS=${PEERS-aioapns ahc-baseline}
export PEERS
if [[ " $PEERS " == *" ahc-baseline "* ]]; then
  (cd "$WORK" && ./setup.sh)
else
  (cd "$WORK" && SKIP_SWIFT=1 ./setup.sh)
fi

log "swift build -c release --product herald-bench"
(cd "$ROOT" && swift build -c release --product herald-bench 2>&1 | tail -n 1 >&2)
BENCH=$ROOT/.build/release/herald-bench

export CUSTOM_PEERS="herald=$BENCH --port {PORT} -n {N} -c {C}
herald-4conn=$BENCH --port {PORT} -n {N} -c {C} --connections 4"
cd "$WORK"
./run-peers.sh
latest=$(ls -1d results/*/ | tail -n 1)
log "results: $WORK/$latest"
