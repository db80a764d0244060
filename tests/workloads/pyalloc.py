"""Allocations known in advance, for the probes' Python frames:
`python3 pyalloc.py N` has `allocate` make N lists of 100 items under
`main`. Each list's 800 bytes of items are past pymalloc's 512, so each
is one call of libc's malloc from `allocate`.

`python3 pyalloc.py N SECONDS FILE` makes rounds of N lists, 5 ms apart,
until SECONDS have passed and writes how many rounds to FILE: an
interpreter on a shared libpython is found by its mapping, some
milliseconds into its life, and its first allocations are made before
that."""

import sys
import time


def allocate(rounds):
    kept = []
    for i in range(rounds):
        kept.append([i] * 100)
    return kept


def main():
    lists = int(sys.argv[1])
    if len(sys.argv) < 4:
        allocate(lists)
        return
    until = time.monotonic() + float(sys.argv[2])
    rounds = 0
    while rounds == 0 or time.monotonic() < until:
        allocate(lists)
        rounds += 1
        time.sleep(0.005)
    with open(sys.argv[3], "w") as report:
        report.write(f"{rounds}\n")


main()
