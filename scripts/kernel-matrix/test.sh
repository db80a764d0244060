#!/usr/bin/env bash
# The qemu kernel matrix as one step of the test suite (`make kernel-matrix`):
# boots every kernel of each architecture with run.sh, then has the guests'
# consoles checked by the ignored test `kernel_matrix::guests_record_exactly`
# (tests/offline), one architecture at a time.
#   test.sh [SERIES...]   (default: 5.10 6.1 6.12 latest, and on x86_64 host
#                         where /boot has the running kernel's image)
#   PROCTRACE_MATRIX_ARCHES="x86_64 aarch64" (the default) picks architectures.
# The kernels are downloaded by `scripts/install-deps.sh --test`; aarch64's
# binary and programs come from scripts/cross-root.sh, which needs root.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
read -ra arches <<<"${PROCTRACE_MATRIX_ARCHES:-x86_64 aarch64}"
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo -E)

# matrix ARCH: boots and checks one architecture's kernels; prints its time.
matrix() {
    local arch=$1 series=("${@:2}") out booted checked start
    if [ "${#series[@]}" -eq 0 ]; then
        series=(5.10 6.1 6.12 latest)
        # The machine's own kernel boots in the matrix of its architecture.
        if [ "$arch" = "$(uname -m)" ] && [ -r "/boot/vmlinuz-$(uname -r)" ]; then
            series+=(host)
        elif [ "$arch" = "$(uname -m)" ]; then
            # The rest of the test suite runs on the host kernel anyway.
            echo "kernel-matrix: no /boot/vmlinuz-$(uname -r): the host's own kernel is not booted" >&2
        fi
    fi
    start=$(date +%s)
    out=$(mktemp -d "${TMPDIR:-/tmp}/proctrace-kernel-matrix-$arch.XXXXXX")
    # The consoles are kept for a look when a guest fails; removed otherwise.
    if [ "$arch" = x86_64 ]; then
        "$here/run.sh" --arch "$arch" "$out" "${series[@]}"
    else
        "${sudo[@]}" "$here/run.sh" --arch "$arch" "$out" "${series[@]}"
    fi
    booted=$?
    (cd "$repo" && PROCTRACE_KERNEL_MATRIX_LOGS=$out cargo test --locked --test offline -- \
        --ignored --exact kernel_matrix::guests_record_exactly --nocapture)
    checked=$?
    echo "kernel-matrix: $arch took $(($(date +%s) - start))s" >&2
    if [ "$booted" -ne 0 ] || [ "$checked" -ne 0 ]; then
        echo "kernel-matrix: $arch failed (run.sh $booted, check $checked); consoles in $out" >&2
        return 1
    fi
    "${sudo[@]}" rm -rf "$out"
}

status=0
for arch in "${arches[@]}"; do
    matrix "$arch" "$@" || status=1
done
exit $status
