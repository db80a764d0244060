#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages proctrace needs: to build it (default),
# to build the static binary (--static), or also to run its whole test suite
# (--test). Installs only what is missing.
set -euo pipefail

packages=(clang libelf-dev zlib1g-dev pkg-config make gcc)
# The static build (`make static`): libbpf, libelf and zlib from source.
static_packages=(autoconf automake autopoint libtool flex bison gawk libc6-dev)
if [ "${1:-}" = "--static" ]; then
    packages+=("${static_packages[@]}")
fi
if [ "${1:-}" = "--test" ]; then
    # chromium + node/npm: the Mermaid renderer is checked with the real
    # mermaid-cli, and the HTML report in headless chromium; util-linux
    # provides unshare and setpriv for the tests.
    packages+=(chromium nodejs npm util-linux)
    # The kernel matrix (tests/kernel_matrix.rs): the static build, qemu,
    # the guest's busybox and cpio, and the key of Debian's kernel packages.
    packages+=("${static_packages[@]}" qemu-system-x86 busybox-static cpio gzip
        debian-archive-keyring)
    # Real test runners for the bats and hang tests.
    packages+=(bats)
fi

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
# nodejs may come from elsewhere (e.g. NodeSource) with npm bundled.
if command -v node >/dev/null && command -v npm >/dev/null; then
    filtered=()
    for pkg in "${missing[@]}"; do
        case "$pkg" in nodejs | npm) ;; *) filtered+=("$pkg") ;; esac
    done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi

if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "install-deps: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found: install a Rust toolchain (1.82 or newer), e.g. with rustup" >&2
    exit 1
fi
