#!/usr/bin/env python3
"""Generates a realistic proctrace recording (the format of src/event.rs).

A build-like process tree: a root shell forks make-like drivers that fork
compilers, shells and pipelines, nested up to 8 deep, at most ~64 alive at
once; every forked child usually execs (argv, cmdline), some move into their
own process group (SetPGID), a few daemonize (SetSID) and linger (no Exit).
Exits: mostly 0, some non-zero, some killed by a signal.

With --raw the recording is system-wide: many unrelated trees (children of
pid 1) run interleaved with the tree of the header's root_pid, the one that
`proctrace ingest --root-pid` extracts.

Deterministic for a given --seed. No dependencies beyond Python 3.
"""

import argparse
import json
import random
import sys

PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def shell_quote(word):
    if word and all(c in PLAIN for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def argv_for(rng, depth, serial):
    """A plausible program and argv for a process at `depth`."""
    n = serial
    kind = rng.random()
    if depth <= 1:
        return "/usr/bin/make", ["make", "-j8", "-C", f"src/module{n % 97}", "all"]
    if kind < 0.45:
        src = f"src/module{n % 97}/file{n % 1009}.c"
        return "/usr/bin/gcc", ["gcc", "-O2", "-g", "-Wall", "-Iinclude", f"-DBUILD_ID={n}",
                                "-c", src, "-o", src.replace(".c", ".o")]
    if kind < 0.65:
        return "/bin/sh", ["sh", "-c", f"cd src/module{n % 97} && echo 'step {n}' | tee -a build.log"]
    if kind < 0.80:
        return "/usr/bin/ld", ["ld", "-o", f"build/lib{n % 211}.so", "-shared"] + \
            [f"build/obj{n % 1009 + i}.o" for i in range(rng.randint(1, 6))]
    if kind < 0.90:
        return "/usr/bin/python3", ["python3", "scripts/gen.py", "--out", f"gen/{n}.h", "--verbose"]
    return "/bin/true", ["true"]


class Proc:
    __slots__ = ("pid", "ppid", "pgid", "sid", "depth", "kids", "needs_exec", "tree", "index")

    def __init__(self, pid, ppid, pgid, sid, depth, tree):
        self.pid, self.ppid, self.pgid, self.sid = pid, ppid, pgid, sid
        self.depth, self.kids, self.needs_exec, self.tree = depth, 0, False, tree
        self.index = -1


class Gen:
    MAX_ALIVE = 64
    MAX_DEPTH = 8

    def __init__(self, out, rng, target):
        self.out, self.rng, self.target = out, rng, target
        self.seq = 0
        self.ts = 40_000
        self.next_pid = 1000
        self.procs = {}
        self.alive = {}  # tree id -> list of Proc that can still act
        self.lingering = 0

    def emit(self, kind, body):
        self.ts += self.rng.randint(1_000, 60_000)
        head = f'{{"{kind}":{{"seq":{self.seq},"timestamp":{self.ts},'
        self.out.write(head + json.dumps(body, separators=(",", ":"))[1:] + "}\n")
        self.seq += 1

    def add_alive(self, p):
        lst = self.alive.setdefault(p.tree, [])
        p.index = len(lst)
        lst.append(p)

    def remove_alive(self, p):
        lst = self.alive[p.tree]
        last = lst.pop()
        if last is not p:
            lst[p.index] = last
            last.index = p.index
        p.index = -1

    def new_pid(self):
        pid = self.next_pid
        self.next_pid += 1 + (self.rng.random() < 0.1) * self.rng.randint(1, 5)
        return pid

    def new_root(self, tree, parent, pgid, sid, root_pid=None):
        """A tree's first process: exec'd by a parent outside the recording."""
        pid = root_pid or self.new_pid()
        p = Proc(pid, parent, pgid, sid, 0, tree)
        self.procs[pid] = p
        self.add_alive(p)
        self.exec(p, "/usr/bin/bash", ["bash", "build.sh", f"--tree={tree}"])
        return p

    def exec(self, p, filename, argv):
        p.needs_exec = False
        self.emit("Exec", {"pid": p.pid, "ppid": p.ppid, "pgid": p.pgid, "sid": p.sid,
                           "filename": filename, "argv": argv,
                           "cmdline": " ".join(shell_quote(a) for a in argv),
                           "argv_truncated": False})

    def fork(self, p):
        pid = self.new_pid()
        c = Proc(pid, p.pid, p.pgid, p.sid, p.depth + 1, p.tree)
        self.procs[pid] = c
        p.kids += 1
        self.emit("Fork", {"parent_pid": p.pid, "child_pid": pid, "parent_pgid": p.pgid,
                           "child_pgid": p.pgid, "child_sid": p.sid})
        r = self.rng.random()
        if r < 0.004:
            # A daemon: new session, execs, outlives everything.
            self.emit("SetSID", {"pid": pid, "sid": pid})
            c.sid = c.pgid = pid
            self.exec(c, "/usr/sbin/sccache", ["sccache", "--start-server", f"--port={4000 + pid % 1000}"])
            p.kids -= 1
            self.lingering += 1
            return
        if r < 0.15:
            # A job-control shell puts each pipeline into its own group.
            self.emit("SetPGID", {"pid": pid, "pgid": pid})
            c.pgid = pid
        c.needs_exec = self.rng.random() < 0.92
        self.add_alive(c)

    def exit(self, p):
        self.remove_alive(p)
        r = self.rng.random()
        code, sig = (0, None) if r < 0.85 else (1, None) if r < 0.95 else (None, 15) \
            if r < 0.99 else (None, 9)
        self.emit("Exit", {"pid": p.pid, "ppid": p.ppid, "pgid": p.pgid, "sid": p.sid,
                           "exit_code": code, "signal": sig, "core_dumped": False})
        parent = self.procs.get(p.ppid)
        if parent is not None:
            parent.kids -= 1
        del self.procs[p.pid]

    def step(self, tree):
        lst = self.alive[tree]
        # Recent processes act more often (a build's active frontier).
        p = lst[len(lst) - 1 - min(int(self.rng.expovariate(0.15)), len(lst) - 1)]
        if p.needs_exec:
            self.exec(p, *argv_for(self.rng, p.depth, p.pid))
            return
        can_fork = len(lst) < self.MAX_ALIVE and p.depth < self.MAX_DEPTH and \
            (p.depth < 3 or self.rng.random() < 0.3)
        # Roots of unrelated trees (raw recordings) end too, and new ones start.
        may_exit = p.depth > 0 or (p.tree != 0 and self.rng.random() < 0.05)
        if may_exit and p.kids == 0 and (not can_fork or self.rng.random() < 0.5):
            self.exit(p)
        elif can_fork:
            self.fork(p)
        elif p.kids == 0 and p.depth == 0:
            self.fork(p)

    def drain_events(self, tree):
        return sum(1 + p.needs_exec for p in self.alive.get(tree, []))

    def finish(self, tree, keep_root=False):
        """Exits the tree's remaining processes, children before parents."""
        while self.alive.get(tree):
            lst = self.alive[tree]
            for p in sorted(lst, key=lambda q: -q.depth):
                if p.kids == 0 and not (keep_root and p.depth == 0):
                    if p.needs_exec:
                        self.exec(p, *argv_for(self.rng, p.depth, p.pid))
                    self.exit(p)
            if keep_root and len(lst) == 1:
                return


def header(root_pid, raw):
    return json.dumps({"Header": {
        "format_version": 1, "proctrace_version": "0.1.0",
        "start_time": "2026-11-21T07:40:00.123456789Z", "root_pid": root_pid,
        "command": ["bash", "build.sh"], "kernel": "6.18.44", "raw": raw, "buffer": "ring"}},
        separators=(",", ":")) + "\n"


def trailer(events, end):
    return json.dumps({"Trailer": {
        "events": events, "lost": 0, "lost_buffer_full": 0, "lost_tracking_full": 0,
        "end_timestamp": end, "interrupted": False, "root_exit_code": 0, "root_signal": None}},
        separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--raw", action="store_true", help="system-wide, many unrelated trees")
    ap.add_argument("--trees", type=int, default=40, help="with --raw: unrelated trees alive at once")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    with open(args.output, "w", buffering=1 << 20) as out:
        root_pid = 1000
        out.write(header(root_pid, args.raw))
        g = Gen(out, rng, args.events)
        g.next_pid = root_pid
        g.new_root(0, 999, 999, 900, root_pid=g.new_pid())
        next_tree = 1
        if args.raw:
            for _ in range(args.trees):
                g.new_root(next_tree, 1, 1, 1)
                next_tree += 1
        trees = [0] + list(range(1, next_tree))
        while True:
            # Stop early enough that ending the remaining processes lands
            # on --events; only counted when it can matter.
            if g.seq + 2 * Gen.MAX_ALIVE * len(trees) + 2 >= args.events:
                pending = sum(g.drain_events(t) for t in trees)
                if g.seq + pending + 2 >= args.events:
                    break
            if args.raw:
                # The ingested tree gets a tenth of the machine's events.
                t = 0 if rng.random() < 0.1 else rng.choice(trees[1:])
            else:
                t = 0
            if not g.alive.get(t):
                trees.remove(t)
                if args.raw:
                    g.new_root(next_tree, 1, 1, 1)
                    trees.append(next_tree)
                    next_tree += 1
                continue
            g.step(t)
        for t in trees:
            g.finish(t)
        out.write(trailer(g.seq, g.ts + 100_000))
    print(f"{args.output}: {g.seq} events, {g.next_pid - 1000} pids, "
          f"{g.lingering} lingering", file=sys.stderr)


if __name__ == "__main__":
    main()
