#!/usr/bin/env bash
# The qemu kernel matrix as one step of the test suite (`make kernel-matrix`):
# boots every kernel with run.sh, then has the guests' consoles checked by
# the ignored test `kernel_matrix::guests_record_exactly` (tests/offline).
#   test.sh [SERIES...]   (default: 5.10 6.1 6.12 latest, and host where
#                         /boot has the running kernel's image)
# The kernels are downloaded by `scripts/install-deps.sh --test`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
series=("$@")
if [ "${#series[@]}" -eq 0 ]; then
    series=(5.10 6.1 6.12 latest)
    if [ -r "/boot/vmlinuz-$(uname -r)" ]; then
        series+=(host)
    else
        # The rest of the test suite runs on the host kernel anyway.
        echo "kernel-matrix: no /boot/vmlinuz-$(uname -r): the host's own kernel is not booted" >&2
    fi
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/proctrace-kernel-matrix.XXXXXX")
# The consoles are kept for a look when a guest fails; removed otherwise.
"$here/run.sh" "$out" "${series[@]}"
booted=$?
cd "$repo" || exit 2
PROCTRACE_KERNEL_MATRIX_LOGS=$out cargo test --locked --test offline -- \
    --ignored --exact kernel_matrix::guests_record_exactly --nocapture
checked=$?
if [ "$booted" -ne 0 ] || [ "$checked" -ne 0 ]; then
    echo "kernel-matrix: failed (run.sh $booted, check $checked); consoles in $out" >&2
    exit 1
fi
rm -rf "$out"
