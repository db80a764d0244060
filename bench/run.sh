#!/usr/bin/env bash
# Builds proctrace in release mode and runs the benchmarks W1-W4
# (see BENCHMARKS.md). Needs root for recording, strace for W1's reference.
# Arguments go to bench/bench.py, e.g. --only W1,W2 --rounds 9 --max-load 0
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
exec python3 bench/bench.py "$@"
