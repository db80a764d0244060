#!/usr/bin/env bash
# W5 inside a qemu guest, for the syscall hooks this machine cannot load
# (fexit where BPF trampolines are refused): boots a Debian kernel (TCG)
# with the static proctrace, times a loop of 1-byte read/write syscalls
# without a recording and with one running on each hook, and prints the
# guest-side ratios (the guest's clock, so qemu's own speed cancels out).
#   bench/guest/w5.sh [SERIES] [ROUNDS] [LOOPS]   (default: 6.12 7 50000)
# Each figure is the fastest of 5 runs of LOOPS read/write pairs.
# PROCTRACE_STATIC_BIN=path skips the static build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
series=${1:-6.12}
rounds=${2:-7}
loops=${3:-50000}
out=$(mktemp -d "${TMPDIR:-/tmp}/proctrace-guest-w5.XXXXXX")
trap 'rm -rf "$out"' EXIT
binary=${PROCTRACE_STATIC_BIN:-$("$repo/scripts/build-static.sh")}
busybox=$(readlink -f "$(command -v busybox)")

root=$out/initramfs
mkdir -p "$root"/{bin,proc,sys,dev,tmp}
cp "$busybox" "$root/bin/busybox"
for applet in sh cat grep mount poweroff rm seq sleep true uname; do
    ln -s busybox "$root/bin/$applet"
done
cc -static -O2 -o "$root/syscalls" "$here/syscalls.c"
cp "$binary" "$root/proctrace"
cp "$here/init" "$root/init"
chmod +x "$root/init"
echo "$rounds" >"$root/rounds"
echo "$loops" >"$root/loops"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs.cpio.gz"

kernel=$("$repo/scripts/kernel-matrix/fetch-kernel.sh" "$series")
timeout "${PROCTRACE_QEMU_TIMEOUT:-900}" qemu-system-x86_64 -accel tcg,thread=single -cpu max \
    -smp 2 -m 1G -nographic -no-reboot -kernel "$kernel" -initrd "$out/initramfs.cpio.gz" \
    -append 'console=ttyS0 panic=-1 quiet loglevel=1' </dev/null | tr -d '\r' >"$out/console.log" || true
grep -q "===DONE===" "$out/console.log" || {
    cat "$out/console.log" >&2
    echo "w5.sh: the guest did not finish" >&2
    exit 1
}
python3 - "$out/console.log" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if m := re.search(r"===KERNEL (.*)===", line):
        print(f"guest kernel {m.group(1)}")
    if m := re.search(r"===W5 (\d+) (\S+) (\d+)", line):
        runs.setdefault(int(m.group(1)), {})[m.group(2)] = int(m.group(3))
hooks = sorted({h for r in runs.values() for h in r} - {"base"})
for hook in hooks:
    ratios = [r[hook] / r["base"] for r in runs.values() if hook in r]
    print(f"{hook}: {statistics.median(ratios):.3f}x (median of {len(ratios)} rounds: "
          + ", ".join(f"{x:.3f}" for x in ratios) + ")")
PY
