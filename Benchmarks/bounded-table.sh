#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The rate limiters' BoundedTable against the sweep it replaced, in one run (see
# Benchmarks/bounded-table/main.swift): mean cost per new bucket and the longest single insertion
# in a flood of new addresses. Not a test: nothing fails on a number.
#
#   Benchmarks/bounded-table.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/.build-bench/bounded-table
mkdir -p "$WORK"
# The table's source as it is, its `package` access dropped (one module here), built with
# whole-module optimisation as a release build of HeraldCore is (the generic table specialised),
# against swift-collections' DequeModule from this tree's release build (made now if missing).
if [[ ! -d $ROOT/.build/release/DequeModule.build ]]; then
  (cd "$ROOT" && swift build -c release --product herald 2>&1 | tail -n 1 >&2)
fi
sed 's/^\( *\)package /\1/' "$ROOT/Sources/HeraldCore/BoundedTable.swift" > "$WORK/BoundedTable.swift"
swiftc -O -wmo -I "$ROOT/.build/release/Modules" "$WORK/BoundedTable.swift" "$ROOT/Benchmarks/bounded-table/main.swift" \
  "$ROOT"/.build/release/DequeModule.build/*.o "$ROOT"/.build/release/InternalCollectionsUtilities.build/*.o -o "$WORK/bounded-table"
"$WORK/bounded-table"
