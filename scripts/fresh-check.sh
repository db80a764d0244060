#!/usr/bin/env bash
# Proves the README's quick start on a fresh machine: a Debian bookworm
# minbase root (debootstrap) with nothing but the host's Rust toolchain
# mounted in, a clean clone of this repository's HEAD, then, as the README
# says, the prerequisites it names (make), `make demo` and `CI=true bash
# .ci/run`. Needs root and debootstrap (installed here if missing).
#   scripts/fresh-check.sh [--keep]   (--keep leaves the root for a look)
# The pristine root is cached as a tarball; every run starts from a new copy.
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/fresh. Work: $FRESH_DIR
# (default /var/tmp/proctrace-fresh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=${1:-}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/fresh
work=${FRESH_DIR:-/var/tmp/proctrace-fresh}
root=$work/root
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_bin=$(dirname "$(command -v cargo)")

[ "$(id -u)" -eq 0 ] || {
    echo "fresh-check: needs root (debootstrap, chroot, mounts)" >&2
    exit 2
}
command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

base=$cache/bookworm-minbase.tar
if [ ! -f "$base" ]; then
    echo "fresh-check: debootstrap bookworm minbase (once, cached in $base)" >&2
    mkdir -p "$cache"
    tmp=$(mktemp -d "$work.debootstrap.XXXXXX")
    debootstrap --variant=minbase bookworm "$tmp" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1
    tar -C "$tmp" -cf "$base.tmp" .
    rm -rf "$tmp"
    mv "$base.tmp" "$base"
fi

unmount_all() {
    # Deepest first; lazily, so a busy mount never blocks the cleanup.
    local mounts
    mounts=$(findmnt -rn -o TARGET | grep -E "^$root(/|\$)" | sort -r) || return 0
    for m in $mounts; do umount -l "$m" || true; done
}
cleanup() {
    unmount_all
    [ "$keep" = --keep ] || rm -rf "$work"
}
unmount_all
rm -rf "$work"
mkdir -p "$root"
trap cleanup EXIT
tar -C "$root" -xf "$base"
# debootstrap ran in a private temporary directory: / must be 755 again.
chmod 755 "$root"
# A mount point, as a machine's / is: unshare --propagation needs one.
mount --bind "$root" "$root"

git clone -q --no-hardlinks "$repo" "$root/root/proctrace"
mkdir -p "$root/opt/rustup" "$root/opt/cargo-bin"
mount --bind -o ro "$rustup_home" "$root/opt/rustup"
mount --bind -o ro "$cargo_bin" "$root/opt/cargo-bin"
mount -t proc proc "$root/proc"
# /sys with what a booted machine has mounted on it (its cgroups: a test
# makes a memory cgroup), as /dev with its pts and shm.
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# Where / is shared (systemd), unmounting the copy must not unmount the host's.
mount --make-rslave "$root/sys"
mount --make-rslave "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's network, not the project: a local CA (e.g. an egress proxy's)
# that the root's ca-certificates must trust once install-deps installs it.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

echo "fresh-check: running the quick start in $root" >&2
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/opt/cargo-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    RUSTUP_HOME=/opt/rustup CARGO_HOME=/root/.cargo \
    /bin/bash -euo pipefail -c '
        cd /root/proctrace
        # The one prerequisite the README names besides the Rust toolchain.
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make >/dev/null
        make demo
        CI=true bash .ci/run
    '
echo "fresh-check: passed" >&2
