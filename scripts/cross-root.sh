#!/usr/bin/env bash
# Prints the path of a Debian trixie root holding the aarch64 cross
# toolchain, making it on first use. rustup cannot fetch a cross standard
# library on every machine, but Debian ships one for its own rustc
# (libstd-rust-dev:arm64, rustc 1.85), so the aarch64 binary is built by
# trixie's cargo inside this root, leaving the host's toolchain and
# bookworm alone. Needs root (debootstrap, chroot).
# The root is cached as a tarball and unpacked once into the work directory.
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/cross
# Root:  ${PROCTRACE_CROSS_ROOT:-/var/tmp/proctrace-cross}
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/cross
root=${PROCTRACE_CROSS_ROOT:-/var/tmp/proctrace-cross}
# What the static aarch64 build, the arm64 guests and the armhf compat
# program need: trixie's rust with the arm64 std, the cross gcc (its C
# builds through cc-rs), clang for the BPF object, autotools for the
# vendored libelf, the static arm64 busybox, the AArch32 compiler, and the
# arm64 guests' Python (unpacked below).
packages=(rustc cargo libstd-rust-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    gcc-arm-linux-gnueabihf clang make pkg-config libelf-dev zlib1g-dev
    autoconf automake autopoint libtool flex bison gawk git ca-certificates file)
# trixie's CPython, whose minimal packages an arm64 guest runs: the
# interpreter, its minimal library, its loader and libraries, and ldconfig
# (the recorder finds libc through ld.so.cache).
guest_python=(python3.13-minimal libpython3.13-minimal libc6 libc-bin zlib1g libexpat1)
# Bump when the lists above change, so an old cached root is rebuilt.
version=2

[ "$(id -u)" -eq 0 ] || {
    echo "cross-root: needs root (debootstrap, chroot)" >&2
    exit 2
}
if [ -f "$root/.proctrace-cross-$version" ]; then
    echo "$root"
    exit 0
fi
command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

tarball=$cache/trixie-cross-$version.tar
if [ ! -f "$tarball" ]; then
    echo "cross-root: debootstrap trixie with the aarch64 toolchain (once, cached in $tarball)" >&2
    mkdir -p "$cache"
    tmp=$(mktemp -d /var/tmp/proctrace-cross.debootstrap.XXXXXX)
    trap 'umount -l "$tmp/proc" 2>/dev/null || true; rm -rf "$tmp"' EXIT
    debootstrap --variant=minbase trixie "$tmp" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 || {
        tail -20 "$cache/debootstrap.log" >&2
        exit 1
    }
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    # The host's network: a local CA (e.g. an egress proxy's) the root must trust.
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        mkdir -p "$tmp/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$tmp/usr/local/share/ca-certificates/"
    fi
    mount -t proc proc "$tmp/proc"
    GUEST_PYTHON="${guest_python[*]/%/:arm64}" chroot "$tmp" /bin/sh -euc '
        dpkg --add-architecture arm64
        # A mirror in the middle of a sync fails an index now and then.
        apt-get update -qq || { sleep 10; apt-get update -qq; }
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
        # busybox-static:arm64 is unpacked, never installed: it would
        # replace the root'"'"'s own busybox and cannot run here anyway.
        cd /opt && apt-get download -qq busybox-static:arm64
        dpkg-deb -x busybox-static_*_arm64.deb /opt/busybox-arm64 && rm busybox-static_*_arm64.deb
        # The same for the guests'"'"' Python: unpacked apart, never installed.
        mkdir /opt/python-arm64 && cd /opt/python-arm64
        apt-get download -qq $GUEST_PYTHON
        for deb in *.deb; do dpkg-deb -x "$deb" . && rm "$deb"; done
        update-ca-certificates >/dev/null 2>&1 || true
        apt-get clean
    ' cross-root "${packages[@]}" >>"$cache/debootstrap.log" 2>&1 || {
        tail -20 "$cache/debootstrap.log" >&2
        exit 1
    }
    umount "$tmp/proc"
    tar -C "$tmp" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
fi
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
chmod 755 "$root"
touch "$root/.proctrace-cross-$version"
echo "$root"
