"""Python called back from C over and over, for the Python frames' tests:
each round sums a generator (the builtin `sum` resumes it), reads
attributes through `__getattr__` and sorts with a key function, so that
many samples land while a native eval call is entering or returning.
`python3 pycalls.py N` runs N rounds."""

import sys


def numbers(n):
    for i in range(n):
        yield i


class Lazy:
    def __getattr__(self, name):
        return len(name)


def key(x):
    return -x


def gens():
    return sum(numbers(200))


def attrs():
    lazy = Lazy()
    return sum(lazy.foo + lazy.barbaz for _ in range(200))


def sorts():
    return sorted(range(200), key=key)


def main():
    for _ in range(int(sys.argv[1])):
        gens()
        attrs()
        sorts()


main()
