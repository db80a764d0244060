#!/usr/bin/env bash
# Builds proctrace in release mode and runs the benchmarks W0-W8; see
# BENCHMARKS.md. Recording needs root: the build runs as you, the
# benchmarks through sudo when you are not root. W0 and W1 need strace,
# W8 perf.
# Arguments go to bench/bench.py, e.g. --only W1,W2 --rounds 9 --max-load 0
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
exec $sudo python3 bench/bench.py --proctrace "${CARGO_TARGET_DIR:-target}/release/proctrace" "$@"
