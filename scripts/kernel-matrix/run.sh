#!/usr/bin/env bash
# Boots each kernel of the matrix under qemu (TCG) with an initramfs holding
# static busybox, the static proctrace and the workload; the guest's /init
# records the workload several ways and prints the recordings on the serial
# console. Writes OUT/<kernel>.log per kernel and OUT/proctrace (the binary
# every kernel ran); scripts/kernel-matrix/test.sh has them checked.
#   run.sh OUT [SERIES...]    (default: 5.10 6.1 6.12 latest; see fetch-kernel.sh)
# PROCTRACE_STATIC_BIN=path skips the static build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:?usage: run.sh OUT [SERIES...]}
shift
series=("$@")
[ "${#series[@]}" -gt 0 ] || series=(5.10 6.1 6.12 latest)
timeout_s=${PROCTRACE_QEMU_TIMEOUT:-240}
mkdir -p "$out"
out=$(cd "$out" && pwd)

binary=${PROCTRACE_STATIC_BIN:-$("$repo/scripts/build-static.sh")}
cp "$binary" "$out/proctrace"

busybox=$(readlink -f "$(command -v busybox)")
case "$(ldd "$busybox" 2>&1 || true)" in
*"statically linked"* | *"not a dynamic executable"*) ;;
*)
    echo "run.sh: $busybox is not static: install busybox-static" >&2
    exit 1
    ;;
esac

root=$out/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp}
cp "$busybox" "$root/bin/busybox"
for applet in sh echo cat cp mkdir mount umount poweroff setsid sha256sum cut true uname; do
    ln -s busybox "$root/bin/$applet"
done
cc -static -pthread -O2 -o "$root/threads" "$here/threads.c"
cc -m32 -nostdlib -static -o "$root/compat_setid" "$repo/tests/workloads/compat_setid.S"
cp "$here/init" "$here/workload.sh" "$root/"
cp "$out/proctrace" "$root/proctrace"
chmod +x "$root/init" "$root/workload.sh"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs.cpio.gz"

status=0
for s in "${series[@]}"; do
    kernel=$("$here/fetch-kernel.sh" "$s")
    log=$out/$s.log
    echo "run.sh: booting $s ($kernel)" >&2
    start=$(date +%s)
    timeout "$timeout_s" qemu-system-x86_64 -accel tcg,thread=single -cpu max -smp 2 -m 1G \
        -nographic -no-reboot -kernel "$kernel" -initrd "$out/initramfs.cpio.gz" \
        -append 'console=ttyS0 panic=-1 quiet loglevel=1' </dev/null >"$log" 2>&1 || {
        rc=$?
        echo "run.sh: qemu for $s exited with $rc (124: timed out after ${timeout_s}s)" >&2
        status=1
    }
    echo "run.sh: $s done in $(($(date +%s) - start))s" >&2
done
exit $status
