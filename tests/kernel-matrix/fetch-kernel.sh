#!/usr/bin/env bash
# Prints the path of a Debian kernel image (vmlinuz) of the given series,
# downloading it on first use into the cache directory:
#   fetch-kernel.sh 5.10|6.1|6.12
# The download uses a private apt configuration (its own sources list, lists
# and cache under the cache directory) and leaves the system's apt alone.
# Cache: ${PROCTRACE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/kernels}
set -euo pipefail

series=${1:?usage: fetch-kernel.sh SERIES}
cache=${PROCTRACE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proctrace/kernels}

case "$series" in
5.10) suite=bullseye pattern='^linux-image-5\.10\.0-[0-9]+-amd64-unsigned$' ;;
6.1) suite=bookworm pattern='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' ;;
6.12) suite=bookworm pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' ;;
*)
    echo "fetch-kernel: unknown series $series (5.10, 6.1 or 6.12)" >&2
    exit 2
    ;;
esac

dir=$cache/$series
if [ -f "$dir/vmlinuz" ]; then
    echo "$dir/vmlinuz"
    exit 0
fi

apt_dir=$cache/apt-$suite
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
# bullseye left deb.debian.org for archive.debian.org after its LTS ended;
# try the main mirror first, then the archive.
mirrors=(http://deb.debian.org/debian http://archive.debian.org/debian)
security=(http://deb.debian.org/debian-security http://archive.debian.org/debian-security)
apt_opts=()
found=""
for i in "${!mirrors[@]}"; do
    cat >"$apt_dir/sources.list" <<SOURCES
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirrors[$i]} $suite main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${security[$i]} $suite-security main
SOURCES
    apt_opts=(
        -o "Dir::Etc::SourceList=$apt_dir/sources.list"
        -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache"
        -o Acquire::Check-Valid-Until=false
        -o APT::Sandbox::User=root
    )
    if apt-get "${apt_opts[@]}" update -qq >&2 2>"$apt_dir/update.log" || true; then
        found=$(apt-cache "${apt_opts[@]}" pkgnames linux-image- | grep -E "$pattern" | sort -V | tail -1 || true)
    fi
    [ -n "$found" ] && break
done
if [ -z "$found" ]; then
    echo "fetch-kernel: no package matching $pattern in Debian $suite" >&2
    cat "$apt_dir/update.log" >&2 || true
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-kernel: downloading $found ($suite)" >&2
(cd "$work" && apt-get "${apt_opts[@]}" download -qq "$found" >&2)
dpkg-deb -x "$work"/*.deb "$work/root"
image=$(ls "$work"/root/boot/vmlinuz-* | head -1)
mkdir -p "$dir.tmp"
cp "$image" "$dir.tmp/vmlinuz"
basename "$image" | sed 's/^vmlinuz-//' >"$dir.tmp/release"
echo "$found" >"$dir.tmp/package"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$dir/vmlinuz"
