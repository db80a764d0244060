#!/usr/bin/env bash
# The release artifacts (`make dist`): for each architecture a tarball
# proctrace-VERSION-ARCH-linux.tar.gz holding the static binary, the man
# pages, the bash, zsh and fish completions, README, the guide (docs/) and
# the licences, and SHA256SUMS beside them, all in DIR (default dist/);
# prints their paths.
#   dist.sh [DIR]     PROCTRACE_DIST_ARCHES="x86_64 aarch64" (the default)
# aarch64 is cross-built (scripts/build-static.sh), which needs root. The
# man pages and completions come from the binary that runs here; they are
# the same for every architecture. The archives' entries carry the
# commit's time, not the build's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
dir=${1:-dist}
read -ra arches <<<"${PROCTRACE_DIST_ARCHES:-x86_64 aarch64}"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
mtime=$(git log -1 --format=@%ct 2>/dev/null || date +@%s)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# package ARCH BINARY: one architecture's tarball, named on stdout.
package() {
    local name=proctrace-$version-$1-linux stage
    stage=$(mktemp -d)
    mkdir -p "$stage/$name/man" "$stage/$name/completions"
    install -m 755 "$2" "$stage/$name/proctrace"
    cp README.md LICENSE-MIT LICENSE-APACHE "$stage/$name/"
    cp -R docs "$stage/$name/"
    "$native" man --dir "$stage/$name/man"
    "$native" completions bash >"$stage/$name/completions/proctrace.bash"
    "$native" completions zsh >"$stage/$name/completions/_proctrace"
    "$native" completions fish >"$stage/$name/completions/proctrace.fish"
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
        -cf - "$name" | gzip -n -9 >"$dir/$name.tar.gz"
    rm -rf "$stage"
    echo "$name.tar.gz"
}

native=$(scripts/build-static.sh "$(uname -m)")
tarballs=()
for arch in "${arches[@]}"; do
    binary=$native
    [ "$arch" = "$(uname -m)" ] || binary=$(scripts/build-static.sh "$arch")
    tarballs+=("$(package "$arch" "$binary")")
done
(cd "$dir" && sha256sum "${tarballs[@]}" >SHA256SUMS)
for file in "${tarballs[@]}" SHA256SUMS; do echo "$dir/$file"; done
