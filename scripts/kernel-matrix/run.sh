#!/usr/bin/env bash
# Boots each kernel of the matrix under qemu (TCG) with an initramfs holding
# static busybox, the static proctrace and the workload; the guest's /init
# records the workload several ways and prints the recordings on the serial
# console. Writes OUT/<kernel>.log per kernel and OUT/proctrace (the binary
# every kernel ran); scripts/kernel-matrix/test.sh has them checked.
#   run.sh [--arch x86_64|aarch64] OUT [SERIES...]
#   (default x86_64, and 5.10 6.1 6.12 latest; see fetch-kernel.sh)
# aarch64: Debian's arm64 kernels on qemu's virt machine, the binary, the
# arm64 busybox and the workload's programs from scripts/cross-root.sh.
# PROCTRACE_STATIC_BIN=path skips the static build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arch=x86_64
if [ "${1:-}" = --arch ]; then
    arch=${2:?usage: run.sh [--arch x86_64|aarch64] OUT [SERIES...]}
    shift 2
fi
out=${1:?usage: run.sh [--arch x86_64|aarch64] OUT [SERIES...]}
shift
series=("$@")
[ "${#series[@]}" -gt 0 ] || series=(5.10 6.1 6.12 latest)
timeout_s=${PROCTRACE_QEMU_TIMEOUT:-240}
mkdir -p "$out"
out=$(cd "$out" && pwd)

binary=${PROCTRACE_STATIC_BIN:-$("$repo/scripts/build-static.sh" "$arch")}
cp "$binary" "$out/proctrace"

root=$out/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,etc}

# in_root FROM PATH: the file PATH (/lib/..., /sbin/...) of the root FROM,
# where it is, or under /usr (merged /usr), links followed.
in_root() {
    local file
    for file in "$1$2" "$1/usr$2"; do
        [ -e "$file" ] && readlink -f "$file" && return
    done
    echo "run.sh: no $2 in the root $1" >&2
    exit 1
}

# add_python FROM PYTHON TRIPLET FILES: the interpreter FROM/PYTHON (FROM a
# root, / for the host's) as /usr/bin/python3 with FILES (its minimal
# library, paths in FROM), the loader and the libraries it needs, and
# ldconfig, each where the guest's loader looks; the guest's /init makes
# ld.so.cache, through which the recorder finds libc's setenv.
add_python() {
    local from=$1 python=$2 triplet=$3 files=$4 interp lib
    install -D "$from$python" "$root$python"
    ln -s "$(basename "$python")" "$root/usr/bin/python3"
    while read -r file; do
        install -D -m 644 "$from$file" "$root$file"
    done <<<"$files"
    # Not needed, but looked for (a warning on stderr where it is not).
    mkdir -p "$root/usr/lib/$(basename "$python")/lib-dynload"
    interp=$(readelf -l "$from$python" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
    install -D "$(in_root "$from" "$interp")" "$root$interp"
    for lib in $(readelf -d "$from$python" | sed -n 's/.*(NEEDED).*\[\(.*\)]/\1/p'); do
        install -D "$(in_root "$from" "/lib/$triplet/$lib")" "$root/usr/lib/$triplet/$lib"
    done
    install -D "$(in_root "$from" /sbin/ldconfig)" "$root/sbin/ldconfig"
    echo "/usr/lib/$triplet" >"$root/etc/ld.so.conf"
}
case "$arch" in
x86_64)
    busybox=$(readlink -f "$(command -v busybox)")
    case "$(ldd "$busybox" 2>&1 || true)" in
    *"statically linked"* | *"not a dynamic executable"*) ;;
    *)
        echo "run.sh: $busybox is not static: install busybox-static" >&2
        exit 1
        ;;
    esac
    cp "$busybox" "$root/bin/busybox"
    cc -static -pthread -O2 -o "$root/threads" "$here/threads.c"
    cc -m32 -nostdlib -static -o "$root/compat_setid" "$repo/tests/workloads/compat_setid.S"
    # The CPU profile's program, without frame pointers as distributions build.
    cc -static -O2 -fomit-frame-pointer -fno-inline -o "$root/hot" "$repo/tests/workloads/hot.c"
    cc -static -pthread -O2 -fomit-frame-pointer -fno-inline -o "$root/deep" "$repo/tests/workloads/deep.c"
    # USDT probes with known arguments (<sys/sdt.h>: systemtap-sdt-dev).
    cc -static -O2 -fomit-frame-pointer -fno-inline -o "$root/probed" "$repo/tests/workloads/probed.c"
    # The host's Python (Debian's, bookworm's 3.11: a table of offsets).
    python=$(readlink -f /usr/bin/python3)
    add_python / "$python" x86_64-linux-gnu "$(dpkg -L "lib$(basename "$python")-minimal" | grep '\.py$')"
    kernel_arch=amd64
    qemu=(qemu-system-x86_64 -accel tcg,thread=single -cpu max)
    console=ttyS0
    ;;
aarch64)
    cross=$("$repo/scripts/cross-root.sh")
    cp "$cross/opt/busybox-arm64/usr/bin/busybox" "$root/bin/busybox"
    # The workload's programs are compiled in the cross root, from a copy.
    work=$(mktemp -d "$cross/tmp/matrix.XXXXXX")
    cp "$here/threads.c" "$here/compat_setid_arm.S" "$repo/tests/workloads/hot.c" \
        "$repo/tests/workloads/deep.c" "$repo/tests/workloads/probed.c" "$work/"
    # <sys/sdt.h> is the host's (systemtap-sdt-dev, in its multiarch
    # directory): one header for all architectures.
    sdt=$(echo '#include <sys/sdt.h>' | cc -M -x c - | tr ' \\' '\n\n' | grep '/sys/sdt\.h$')
    mkdir -p "$work/include/sys"
    cp "$sdt" "$(dirname "$sdt")/sdt-config.h" "$work/include/sys/"
    chroot "$cross" /bin/sh -euc '
        cd "$1"
        aarch64-linux-gnu-gcc -static -pthread -O2 -o threads threads.c
        # AArch32, where the kernel has COMPAT (Debian'"'"'s arm64 kernels do).
        arm-linux-gnueabihf-gcc -marm -nostdlib -static -o compat_setid compat_setid_arm.S
        aarch64-linux-gnu-gcc -static -O2 -fomit-frame-pointer -fno-inline -o hot hot.c
        aarch64-linux-gnu-gcc -static -pthread -O2 -fomit-frame-pointer -fno-inline -o deep deep.c
        aarch64-linux-gnu-gcc -static -O2 -fomit-frame-pointer -fno-inline -Iinclude -o probed probed.c
    ' build "${work#"$cross"}"
    cp "$work/threads" "$work/compat_setid" "$work/hot" "$work/deep" "$work/probed" "$root/"
    rm -rf "$work"
    # trixie's Python, 3.13: the layout the interpreter describes itself.
    python=$cross/opt/python-arm64
    add_python "$python" /usr/bin/python3.13 aarch64-linux-gnu \
        "$(cd "$python" && find usr/lib/python3.13 -name '*.py' -type f | sed 's,^,/,')"
    kernel_arch=arm64
    # pauth-impdef: qemu's own pointer authentication, many times faster
    # under TCG than the architected algorithm and the same to the guest.
    qemu=(qemu-system-aarch64 -accel tcg,thread=single -M virt -cpu max,pauth-impdef=on)
    console=ttyAMA0
    ;;
*)
    echo "run.sh: unknown architecture $arch (x86_64 or aarch64)" >&2
    exit 2
    ;;
esac
for applet in sh echo cat cp mkdir mount umount poweroff setsid sha256sum cut true uname sleep; do
    ln -s busybox "$root/bin/$applet"
done
cp "$here/init" "$here/workload.sh" "$repo/tests/workloads/pycosts.py" "$root/"
cp "$out/proctrace" "$root/proctrace"
chmod +x "$root/init" "$root/workload.sh"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs.cpio.gz"

# boot KERNEL LOG: one guest, its serial console in LOG.
boot() {
    timeout "$timeout_s" "${qemu[@]}" -smp 2 -m 1G \
        -nographic -no-reboot -kernel "$1" -initrd "$out/initramfs.cpio.gz" \
        -append "console=$console panic=-1 quiet loglevel=1" </dev/null >"$2" 2>&1
}

status=0
for s in "${series[@]}"; do
    kernel=$("$here/fetch-kernel.sh" --arch "$kernel_arch" "$s")
    log=$out/$s.log
    echo "run.sh: booting $arch $s ($kernel)" >&2
    start=$(date +%s)
    rc=0
    boot "$kernel" "$log" || rc=$?
    # An emulated guest on a loaded host once sat silent past the timeout
    # (no kernel warning, no output from the mode under way) and ran
    # through in 30 s when booted again six times. It gets one more boot;
    # the first console is kept, and the run says so.
    if [ "$rc" = 124 ]; then
        mv "$log" "$out/$s.timed-out.console"
        echo "run.sh: $arch $s timed out after ${timeout_s}s (console in $s.timed-out.console); booting it once more" >&2
        rc=0
        boot "$kernel" "$log" || rc=$?
    fi
    if [ "$rc" != 0 ]; then
        echo "run.sh: qemu for $arch $s exited with $rc (124: timed out after ${timeout_s}s)" >&2
        status=1
    fi
    echo "run.sh: $arch $s done in $(($(date +%s) - start))s" >&2
done
exit $status
