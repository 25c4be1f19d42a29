#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Before and after: two commits of Herald, each in its own clone under .build-bench/ab/ (release
# builds), measured one after the other with the three benchmarks that have a reference in the
# same run — client-vs-peers (h2load), emulator-vs-sink (apns-sink), serve-bench (the raw
# client) — then the first commit again, so that the drift of a shared machine shows.
# Not a test: nothing fails on a number.
#
#   Benchmarks/ab.sh 59e763b HEAD
#
# Env: REGISTER, BATCHES, FANOUT (serve-bench; default 20000, 100, 200000), N (100000).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${1:?usage: Benchmarks/ab.sh BEFORE AFTER}
AFTER=${2:?usage: Benchmarks/ab.sh BEFORE AFTER}
WORK=$ROOT/.build-bench/ab
export REGISTER=${REGISTER:-20000} BATCHES=${BATCHES:-100} FANOUT=${FANOUT:-200000} BENCH_DIR=${BENCH_DIR:-$ROOT/../shared/bench}
mkdir -p "$WORK"
for side in before after; do
  commit=$([[ $side == before ]] && echo "$BEFORE" || echo "$AFTER")
  [[ -d $WORK/$side ]] || git clone -q "$ROOT" "$WORK/$side"
  git -C "$WORK/$side" fetch -q "$ROOT" && git -C "$WORK/$side" checkout -q --detach "$(git -C "$ROOT" rev-parse "$commit")"
done
measure() {
  local side=$1
  echo "### $side ($(git -C "$WORK/$side" rev-parse --short HEAD))"
  (cd "$WORK/$side" && PEERS="" Benchmarks/client-vs-peers.sh 2>&1 | grep -E '^\| (client|herald|h2load c=1 m=1000)')
  (cd "$WORK/$side" && N=${N:-100000} RUNS=3 CASES="1x1000" Benchmarks/emulator-vs-sink.sh 2>&1 | grep -E '^\| -c')
  (cd "$WORK/$side" && Benchmarks/serve-bench.sh 2>&1 | grep -E '^\| (raw|registration|sends|accept|broadcast)')
}
measure before
measure after
measure before
