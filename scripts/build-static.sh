#!/usr/bin/env bash
# Builds the fully static release binary (static-pie; libbpf, libelf and
# zlib built from source and linked in) and prints its path. One binary for
# every kernel from 5.10 on.
#   build-static.sh [x86_64|aarch64]   (default: x86_64)
# x86_64 is built with the machine's own toolchain and needs the packages
# of `scripts/install-deps.sh --static`. aarch64 is cross-built by trixie's
# cargo in the root of scripts/cross-root.sh (made on first use; needs
# root), where the repository is mounted at its own path.
# --target keeps build scripts and proc-macros dynamic: only proctrace
# itself is linked with +crt-static.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
arch=${1:-x86_64}
target=$arch-unknown-linux-gnu
build=(build --release --locked --features static --target "$target")

case "$arch" in
x86_64)
    RUSTFLAGS='-C target-feature=+crt-static' "${CARGO:-cargo}" "${build[@]}" >&2
    binary=${CARGO_TARGET_DIR:-$repo/target}/$target/release/proctrace
    ;;
aarch64)
    root=$("$repo/scripts/cross-root.sh")
    # trixie's rustc builds into a directory of its own: its artifacts do
    # not mix with the host toolchain's.
    target_dir=$repo/target/cross
    # The repository at its own path, and a worktree's common git
    # directory, so that build.rs can read the commit.
    mounts=("$repo")
    common=$(cd "$repo" && git rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || common=""
    case "$common" in "" | "$repo"/*) ;; *) mounts+=("$common") ;; esac
    for dir in "${mounts[@]}"; do
        mkdir -p "$root$dir"
        mountpoint -q "$root$dir" || mount --bind "$dir" "$root$dir"
    done
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    trap 'for dir in "${mounts[@]}" /proc; do umount -l "$root$dir" 2>/dev/null || true; done' EXIT
    # Every crate's C goes through cc-rs and this compiler; elfutils
    # fails on gcc 14's stringop-overflow warning for aarch64, which
    # libbpf-sys only waives when it is built on aarch64 itself.
    cc_target=${target//-/_}
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        CARGO_HOME=/root/.cargo CARGO_TARGET_DIR="$target_dir" \
        RUSTFLAGS='-C target-feature=+crt-static' \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        "CC_$cc_target=aarch64-linux-gnu-gcc" "AR_$cc_target=aarch64-linux-gnu-ar" \
        "CFLAGS_$cc_target=-Wno-error=stringop-overflow" \
        /bin/sh -c 'cd "$1" && shift && git config --global safe.directory "*" && cargo "$@"' \
        build-static "$repo" "${build[@]}" >&2
    binary=$target_dir/$target/release/proctrace
    ;;
*)
    echo "build-static: unknown architecture $arch (x86_64 or aarch64)" >&2
    exit 2
    ;;
esac

# A static executable has no program interpreter.
machine=$(readelf -h "$binary" | sed -n 's/^ *Machine: *//p')
if readelf -lW "$binary" | grep -q INTERP; then
    echo "build-static: $binary ($machine) is not static: it names a dynamic loader" >&2
    exit 1
fi
echo "$binary"
