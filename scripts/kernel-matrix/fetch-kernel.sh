#!/usr/bin/env bash
# Prints the path of a Debian kernel image (vmlinuz) of the given series,
# downloading it on first use into the cache directory:
#   fetch-kernel.sh [--arch amd64|arm64] 5.10|6.1|6.12|latest|host
# (--arch: Debian's architecture of the kernel, amd64 by default; host is
# the running kernel, of the machine's own architecture.)
# The download uses a private apt configuration (its own sources list, lists
# and cache under the cache directory) and leaves the system's apt alone.
# Cache: ${PROCTRACE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/kernels}
set -euo pipefail

arch=amd64
if [ "${1:-}" = --arch ]; then
    arch=${2:?usage: fetch-kernel.sh [--arch amd64|arm64] SERIES}
    shift 2
fi
case "$arch" in
amd64 | arm64) ;;
*)
    echo "fetch-kernel: unknown architecture $arch (amd64 or arm64)" >&2
    exit 2
    ;;
esac
series=${1:?usage: fetch-kernel.sh [--arch amd64|arm64] SERIES}
cache=${PROCTRACE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/kernels}
# amd64's cache keeps the layout it had before arm64 was added.
[ "$arch" = amd64 ] || cache=$cache/$arch

case "$series" in
5.10) suites="bullseye bullseye-security" pattern="^linux-image-5\.10\.0-[0-9]+-$arch-unsigned\$" ;;
6.1) suites="bookworm bookworm-security" pattern="^linux-image-6\.1\.0-[0-9]+-$arch-unsigned\$" ;;
6.12) suites="bookworm bookworm-security" pattern="^linux-image-6\.12\.[0-9]+\+deb12-$arch-unsigned\$" ;;
# The newest kernel Debian builds for stable, whatever its version is
# when the cache is first filled.
# (There the image is in linux-binary-*, linux-image-* is only its signature.)
latest) suites="trixie-backports" pattern="^linux-binary-[0-9.]+\+deb13-$arch\$" ;;
host)
    # The machine's own kernel, where its image is readable.
    image=/boot/vmlinuz-$(uname -r)
    [ -r "$image" ] || {
        echo "fetch-kernel: $image is missing" >&2
        exit 1
    }
    echo "$image"
    exit 0
    ;;
*)
    echo "fetch-kernel: unknown series $series (5.10, 6.1, 6.12, latest or host)" >&2
    exit 2
    ;;
esac

dir=$cache/$series
if [ -f "$dir/vmlinuz" ]; then
    echo "$dir/vmlinuz"
    exit 0
fi

apt_dir=$cache/apt-${suites%% *}
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
# Old releases leave deb.debian.org for archive.debian.org: try the main
# mirror first, then the archive.
found=""
for mirror in http://deb.debian.org http://archive.debian.org; do
    : >"$apt_dir/sources.list"
    for suite in $suites; do
        case "$suite" in
        *-security) path=debian-security ;;
        *) path=debian ;;
        esac
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror/$path $suite main" \
            >>"$apt_dir/sources.list"
    done
    apt_opts=(
        -o "Dir::Etc::SourceList=$apt_dir/sources.list"
        -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache"
        -o Acquire::Check-Valid-Until=false
        -o APT::Sandbox::User=root
        -o "APT::Architecture=$arch"
        -o "APT::Architectures=$arch"
    )
    if apt-get "${apt_opts[@]}" update -qq >"$apt_dir/update.log" 2>&1; then
        found=$(apt-cache "${apt_opts[@]}" pkgnames linux- | grep -E "$pattern" | sort -rV || true)
    fi
    [ -n "$found" ] && break
done
if [ -z "$found" ]; then
    echo "fetch-kernel: no package matching $pattern in Debian $suites" >&2
    cat "$apt_dir/update.log" >&2 || true
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Newest first; a mirror in the middle of a sync may list a package its
# pool does not hold yet, then the one before it is taken.
for package in $found; do
    echo "fetch-kernel: downloading $package ($suites)" >&2
    (cd "$work" && apt-get "${apt_opts[@]}" download -qq "$package" >&2) && break
    package=""
done
[ -n "$package" ] || exit 1
found=$package
dpkg-deb -x "$work"/*.deb "$work/root"
# /boot/vmlinuz-RELEASE, or /usr/lib/modules/RELEASE/vmlinuz (trixie's).
image=$(find "$work/root" -name 'vmlinuz*' -type f | head -1)
[ -n "$image" ] || {
    echo "fetch-kernel: no vmlinuz in $found" >&2
    exit 1
}
mkdir -p "$dir.tmp"
cp "$image" "$dir.tmp/vmlinuz"
case "$image" in
*/vmlinuz-*) echo "${image##*/vmlinuz-}" ;;
*) basename "$(dirname "$image")" ;;
esac >"$dir.tmp/release"
echo "$found" >"$dir.tmp/package"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$dir/vmlinuz"
