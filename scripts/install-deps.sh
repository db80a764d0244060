#!/usr/bin/env bash
# Installs everything proctrace needs, and only what is missing:
#   install-deps.sh           to build it (what `make build` and `make demo` run)
#   install-deps.sh --static  also to build the static binary (`make static`)
#   install-deps.sh --bench   also what the benchmarks use (`make bench`)
#   install-deps.sh --test    also everything the test suite uses (`make test`):
#                             Debian packages, the npm tools in tests/.node, the
#                             Python packages in tests/.venv, cargo-nextest in
#                             tests/.cargo (unless on the PATH), the x86_64 and
#                             arm64 kernels of the qemu matrix in the cache and
#                             the aarch64 cross root (scripts/cross-root.sh).
# Tests never install anything themselves: what they need is listed here.
# Needs a Debian or Ubuntu machine with apt-get, and a Rust toolchain.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}

# To build: clang compiles the BPF program, libbpf-sys links libelf and zlib
# through pkg-config; ca-certificates lets cargo reach crates.io.
packages=(clang libelf-dev zlib1g-dev pkg-config make gcc libc6-dev ca-certificates)
# The static build: libbpf, libelf and zlib from source.
static_packages=(autoconf automake autopoint libtool flex bison gawk)
# The test suite:
# - chromium, nodejs, npm: the Mermaid charts through the real mermaid-cli,
#   the HTML report, flame graphs and speedscope in headless chromium;
# - util-linux: unshare and setpriv; procps: ps and pgrep; bats: the suites
#   of the hang and leak tests; python3-pytest: a pytest suite that leaks;
#   python3-pytest-xdist: a suite split over worker processes;
#   git: the tests' clean checkouts; tmux: a terminal for the status line
#   and the live view; groff-base: the man pages typeset; golang-go: a go
#   test that hangs in exec.Command().Output(), a goroutine dump on
#   --timeout-signal QUIT, and `go tool pprof` reading `render -d pprof`;
#   linux-perf: perf, the oracle the CPU profile's shares and the
#   off-CPU wait totals (perf sched) are checked against;
#   systemtap-sdt-dev: <sys/sdt.h>, the USDT probes of the --probe tests'
#   workload; libc6-dbg: libc's compressed DWARF, named from one unit
#   and checked against blazesym;
#   python3-venv: tests/.venv, where opentelemetry-proto checks
#   `render -d otlp` against the real schema and rotel receives what
#   `export otlp` sends; libpython3-dev: rotel's binary links the default
#   python's libpython3.X.so (a minimal Debian has none);
# - the kernel matrix: qemu for both architectures, the guest's static
#   busybox, cpio, the static build, and the key of Debian's kernel packages.
test_packages=(chromium nodejs npm util-linux procps bats python3-pytest python3-pytest-xdist git tmux groff-base
    golang-go python3-venv libpython3-dev linux-perf systemtap-sdt-dev libc6-dbg qemu-system-x86 qemu-system-arm busybox-static cpio gzip debian-archive-keyring)
# The benchmarks: strace as the peer of W0 and W1, time for W4, CPython's own tests for
# W6 (Debian's python3 ships without them), perf as the peer of W8, curl for
# zlib's sources (below), and the guest W5's qemu, busybox and static build.
bench_packages=(strace time curl ca-certificates "libpython3.$(python3 -c 'import sys; print(sys.version_info[1])' 2>/dev/null || echo 11)-testsuite"
    linux-perf qemu-system-x86 busybox-static cpio gzip debian-archive-keyring)
case "$mode" in
"") ;;
--static) packages+=("${static_packages[@]}") ;;
--bench) packages+=("${static_packages[@]}" "${bench_packages[@]}") ;;
--test) packages+=("${static_packages[@]}" "${test_packages[@]}") ;;
*)
    echo "usage: install-deps.sh [--static|--bench|--test]" >&2
    exit 2
    ;;
esac

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    # nodejs may come from elsewhere (e.g. NodeSource) with npm bundled.
    if command -v node >/dev/null && command -v npm >/dev/null; then
        local kept=()
        for pkg in "${missing[@]+"${missing[@]}"}"; do
            case "$pkg" in nodejs | npm) ;; *) kept+=("$pkg") ;; esac
        done
        missing=("${kept[@]+"${kept[@]}"}")
    fi
    [ "${#missing[@]}" -gt 0 ] || return 0
    echo "install-deps: installing ${missing[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

# mermaid-cli and speedscope from npm in tests/.node, both driven by Debian's
# chromium: puppeteer's own browser download is skipped, CI machines often
# cannot reach it.
install_node_tools() {
    local dir=$repo/tests/.node
    if [ ! -x "$dir/node_modules/.bin/mmdc" ] || [ ! -f "$dir/node_modules/speedscope/dist/release/index.html" ]; then
        echo "install-deps: installing mermaid-cli and speedscope into $dir" >&2
        mkdir -p "$dir"
        PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            @mermaid-js/mermaid-cli@11 speedscope@1 >/dev/null
    fi
    cat >"$dir/puppeteer.json" <<JSON
{"executablePath":"/usr/bin/chromium","args":["--no-sandbox","--headless","--disable-gpu","--disable-background-networking","--disable-component-update","--disable-sync","--no-first-run"]}
JSON
}

# From PyPI in tests/.venv, on Debian's python3: opentelemetry-proto, the
# OTLP schema `render -d otlp` is checked against, with the protobuf it
# needs; rotel, a collector (its binary inside the wheel) that the tests of
# `export otlp` send to; py-spy, the oracle of the Python frames.
install_python_tools() {
    local dir=$repo/tests/.venv
    if ! "$dir/bin/python3" -c 'import opentelemetry.proto, rotel' 2>/dev/null ||
        [ ! -x "$dir/bin/py-spy" ]; then
        echo "install-deps: installing opentelemetry-proto, rotel and py-spy into $dir" >&2
        /usr/bin/python3 -m venv "$dir"
        "$dir/bin/pip" install --quiet --disable-pip-version-check 'opentelemetry-proto>=1.27,<2' \
            'rotel==0.0.1a15' 'py-spy==0.4.3'
    fi
}

# cargo-nextest, whose USDT probes name the tests of tests/kernel/nextest.rs,
# from crates.io into tests/.cargo where no cargo-nextest is on the PATH
# (Debian packages none; building it takes minutes, once).
install_nextest() {
    local dir=$repo/tests/.cargo
    command -v cargo >/dev/null || return 0
    if ! command -v cargo-nextest >/dev/null && [ ! -x "$dir/bin/cargo-nextest" ]; then
        echo "install-deps: building cargo-nextest into $dir (minutes, once)" >&2
        cargo install --quiet --locked --root "$dir" cargo-nextest@0.9.143
    fi
}

# The Debian kernels the qemu matrix boots, downloaded once into the cache,
# and the root that cross-builds the aarch64 binary and its guests' programs.
fetch_kernels() {
    local series arch
    for arch in amd64 arm64; do
        for series in 5.10 6.1 6.12 latest; do
            "$repo/scripts/kernel-matrix/fetch-kernel.sh" --arch "$arch" "$series" >/dev/null
        done
    done
    as_root "$repo/scripts/cross-root.sh" >/dev/null
}

# zlib's sources for W8's build of `libz.a`, the build issue #50's budget
# is set on: crates.io is reachable where zlib's own site may not be, and
# libz-sys carries zlib 1.3.1's sources (without its configure script).
fetch_zlib() {
    local dir=$repo/bench/.zlib crate=libz-sys-1.1.22
    local sum=8b70e7a7df205e92a1a4cd9aaae7898dac0aa555503cc0a649494d0d60e7651d
    [ -f "$dir/zlib.h" ] && return 0
    echo "install-deps: fetching zlib's sources ($crate) into $dir" >&2
    local tmp
    tmp=$(mktemp -d)
    curl -fsSL -o "$tmp/$crate.crate" "https://static.crates.io/crates/libz-sys/$crate.crate"
    echo "$sum  $tmp/$crate.crate" | sha256sum -c --quiet
    tar -xzf "$tmp/$crate.crate" -C "$tmp"
    mkdir -p "$dir"
    cp "$tmp/$crate"/src/zlib/*.[ch] "$dir/"
    rm -rf "$tmp"
}

install_packages "${packages[@]}"
if [ "$mode" = --bench ]; then
    fetch_zlib
fi
if [ "$mode" = --test ]; then
    install_node_tools
    install_python_tools
    install_nextest
    fetch_kernels
fi

if ! command -v cargo >/dev/null; then
    echo "install-deps: cargo not found: install a Rust toolchain (1.85 or newer), e.g. with rustup" >&2
    exit 1
fi
