#!/bin/bash
# The tracer's CPU per thread while it records zlib's `make -j2 libz.a`
# with `--cpu-profile=99`: perf counts cpu-clock samples at 1999 Hz by
# thread name. The builds given run interleaved, each with a names cache
# of its own; the figures are medians of the rounds after the first.
#
#   bench/threads.sh ROUNDS PROCTRACE_BINARY...
#
# Needs perf and zlib's sources (scripts/install-deps.sh --bench).
# BENCHMARKS.md quotes it ("Naming without reading every unit or FDE").
set -euo pipefail
rounds=$1
shift
bench=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import bench; bench.write_zlib_makefile(sys.argv[2])" \
    "$bench" "$work/zlib.mk"
for round in $(seq "$rounds"); do
    for binary in "$@"; do
        name=$(basename "$binary")
        rm -rf "$work/out" && mkdir "$work/out"
        XDG_CACHE_HOME="$work/cache-$name" perf record -q -F 1999 -e cpu-clock -o "$work/perf.data" -- \
            "$binary" record -q --cpu-profile=99 -o "$work/recording.jsonl" -- \
            make -s -j2 -C "$work/out" -f "$work/zlib.mk" libz.a >/dev/null 2>&1
        # Columns: share, samples, thread name (15 characters); the main
        # thread carries the binary's own name.
        perf report -i "$work/perf.data" --no-children --sort comm -q -g none -n 2>/dev/null |
            awk -v name="$name" -v round="$round" '
                $3 ~ /^proctrace-/ || $3 == substr(name, 1, 15) {
                    thread = ($3 ~ /^proctrace-/) ? $3 : "main"
                    print name, round, thread, $2 / 1.999
                }' >>"$work/counts"
    done
done
python3 - "$work/counts" <<'SUMMARY'
import collections, statistics, sys
ms = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    binary, _, thread, value = line.split()
    ms[binary][thread].append(float(value))
for binary, threads in ms.items():
    warm = {t: statistics.median(v[1:] or v) for t, v in sorted(threads.items())}
    parts = "  ".join(f"{t}={v:.0f}" for t, v in warm.items())
    print(f"{binary}: {parts}  sum={sum(warm.values()):.0f} (ms)")
SUMMARY
