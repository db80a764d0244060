"""CPU costs known in advance, for the Python frames' tests: `heavy` runs
the same loop as `light` three times as many times, both under `main`.
`python3 pycosts.py N` runs N rounds. `python3 pycosts.py children N FILE`
starts N short children, each running `short_child_work` (about 50 ms,
five times `light`), and runs `light` as many times as they all do; each
appends the CPU time its work took to FILE (`short SECONDS`, `long
SECONDS`): a new process runs the same loop slower than a warm one.
`python3 pycosts.py tests N` runs N rounds, each `heavy` then `light`
as the tests `pycosts.py::test_heavy` and `pycosts.py::test_light`,
named in the process as pytest names them (`PYTEST_CURRENT_TEST`).
Only the children need more than the interpreter's minimal library
(Debian's `libpython3.X-minimal`), which is all the qemu matrix's guests
have."""

import os
import sys
import time

UNIT = 200_000


def spin(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total


def heavy():
    return spin(3 * UNIT)


def light():
    return spin(UNIT)


def short_child_work():
    return spin(5 * UNIT)


def timed(kind, work, file):
    start = time.process_time()
    work()
    with open(file, "a") as out:
        out.write(f"{kind} {time.process_time() - start}\n")


def as_test(name, work):
    os.environ["PYTEST_CURRENT_TEST"] = f"pycosts.py::{name} (call)"
    work()
    del os.environ["PYTEST_CURRENT_TEST"]


def main():
    if sys.argv[1] == "children":
        import subprocess

        for _ in range(int(sys.argv[2])):
            subprocess.run([sys.executable, __file__, "child", sys.argv[3]], check=True)
            for _ in range(5):
                timed("long", light, sys.argv[3])
    elif sys.argv[1] == "tests":
        for _ in range(int(sys.argv[2])):
            as_test("test_heavy", heavy)
            as_test("test_light", light)
    elif sys.argv[1] == "child":
        timed("short", short_child_work, sys.argv[2])
    else:
        for _ in range(int(sys.argv[1])):
            heavy()
            light()


main()
