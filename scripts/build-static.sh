#!/usr/bin/env bash
# Builds the fully static release binary (static-pie; libbpf, libelf and
# zlib built from source and linked in) and prints its path. One binary for
# every kernel from 5.10 on. Needs the packages of `scripts/install-deps.sh`.
# --target keeps build scripts and proc-macros dynamic: only proctrace
# itself is linked with +crt-static.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-gnu
RUSTFLAGS='-C target-feature=+crt-static' "${CARGO:-cargo}" build --release --locked \
    --features static --target "$target" >&2
binary=${CARGO_TARGET_DIR:-$PWD/target}/$target/release/proctrace
# glibc's ldd: "statically linked" for a static-pie.
case "$(ldd "$binary" 2>&1 || true)" in
*"statically linked"* | *"not a dynamic executable"*) ;;
*)
    echo "build-static: $binary is not static:" >&2
    ldd "$binary" >&2
    exit 1
    ;;
esac
echo "$binary"
