//! The profile's own thread: it takes the samples as the drain reads them,
//! the tree's forks as the drain releases them and the execs and
//! executable mappings as the kernel announces them, puts them in one time
//! order, unwinds each sample against the mappings in force when it was
//! taken, and counts stacks per process. At the end it names every frame
//! once and hands back the profile's records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

mod attempts;
mod spaces;

use crate::event::{
    latency_bucket, ArgValue, CpuSamples, Frame, Pid, ProbeArgs, ProbeHits, ProbeLatency, Record,
    Stack, ARG_TUPLES_KEPT,
};
use crate::recorder::probes::AttemptProbe;
use crate::recorder::watch::MmapWatch;
use crate::recorder::wire::{Hit, Mark, Sample};
use crate::recorder::wire::{Mapping, Seen};
use crate::stacks::symbolize::{lookup_address, Symbolizer};
use crate::stacks::unwind::{Module, Regs, Unwinder};
use attempts::Attempts;
use spaces::AddressSpaces;

/// User frames unwound per sample at the most.
const MAX_USER_FRAMES: usize = 127;

/// What the profile's thread is told, in the order it happened.
enum Told {
    /// Announces the mappings of a process and its descendants, with
    /// those it has already.
    Watch(MmapWatch, Vec<Mapping>),
    Sample(Sample),
    Hit(Hit),
    Mark(Mark),
    Fork {
        parent: Pid,
        child: Pid,
        at: u64,
    },
    Exec {
        pid: Pid,
        at: u64,
    },
    Exit {
        pid: Pid,
        at: u64,
    },
    /// Everything up to here has been told: process it.
    Upto(u64),
}

/// How often the mappings are read between two `Upto`s: the kernel's
/// rings for them are small, and a build maps thousands of files.
const READ_MAPPINGS_EVERY: Duration = Duration::from_millis(10);

/// Messages waiting for the profile's thread past which hits lose their
/// stacks: 32 MiB of stack copies.
const MAX_BACKLOG: usize = 4096;

/// A handle on the profile's thread.
pub(crate) struct Collector {
    to: Sender<Told>,
    thread: JoinHandle<Collected>,
    /// Hits counted without their stacks (see [`Collector::hit`]).
    stackless: std::cell::Cell<u64>,
}

/// What the profile's thread made of the recording.
pub(crate) struct Collected {
    /// Frame, Stack, CpuSamples, ProbeHits and ProbeArgs records, each
    /// frame and stack once.
    pub records: Vec<Record>,
    /// Samples counted.
    pub samples: u64,
    /// Probe hits counted.
    pub hits: u64,
    /// Mappings the kernel could not announce (its ring was full): frames
    /// in them are `[unknown]`.
    pub lost_mappings: u64,
    /// Probe hits counted without their stacks: they came faster than
    /// they could be unwound.
    pub stackless_hits: u64,
}

impl Collector {
    /// Starts the thread; `start` is the monotonic time the recording
    /// began, which the mappings' times are made relative to; `pairs` the
    /// (uprobe, uretprobe) ids whose hits time calls; `attempts` the
    /// probes whose hits tell a runner's tests.
    pub fn start(
        start: u64,
        pairs: Vec<(u32, u32)>,
        attempts: HashMap<u32, AttemptProbe>,
    ) -> std::io::Result<Collector> {
        let (to, told) = crossbeam_channel::unbounded();
        let (calls, attempts) = (Calls::new(pairs), Attempts::new(attempts));
        let thread = std::thread::Builder::new()
            .name("proctrace-profile".into())
            .spawn(move || Profiler::new(start, calls, attempts).run(told))?;
        Ok(Collector {
            to,
            thread,
            stackless: std::cell::Cell::new(0),
        })
    }

    /// Reads the mappings `watch` announces from now on, after `mapped`,
    /// those its process has already.
    pub fn watch(&self, watch: MmapWatch, mapped: Vec<Mapping>) {
        let _ = self.to.send(Told::Watch(watch, mapped));
    }

    /// A sample, as soon as it is read.
    pub fn sample(&self, sample: Sample) {
        let _ = self.to.send(Told::Sample(sample));
    }

    /// A process's word on its current test, as soon as it is read.
    pub fn mark(&self, mark: Mark) {
        let _ = self.to.send(Told::Mark(mark));
    }

    /// A probe's hit, as soon as it is read.
    pub fn hit(&self, mut hit: Hit) {
        // A hot probe outruns the unwinding: past the backlog, a hit is
        // counted without its stack rather than held in memory.
        if self.to.len() > MAX_BACKLOG && !hit.sample.stack.is_empty() {
            hit.sample.stack = Vec::new();
            hit.sample.regs = [0; 4];
            self.stackless.set(self.stackless.get() + 1);
        }
        let _ = self.to.send(Told::Hit(hit));
    }

    /// A released event of the tree: a fork starts a process with its
    /// parent's mappings, which the kernel does not announce again (it
    /// announces execs itself, before the new program's mappings).
    pub fn event(&self, record: &Record) {
        let told = match record {
            Record::Fork(fork) => Told::Fork {
                parent: fork.parent_pid,
                child: fork.child_pid,
                at: fork.timestamp,
            },
            Record::Exec(exec) => Told::Exec {
                pid: exec.pid,
                at: exec.timestamp,
            },
            Record::Exit(exit) => Told::Exit {
                pid: exit.pid,
                at: exit.timestamp,
            },
            _ => return,
        };
        let _ = self.to.send(told);
    }

    /// Every event up to `at` has been released.
    pub fn upto(&self, at: u64) {
        let _ = self.to.send(Told::Upto(at));
    }

    /// Processes what is left and returns the profile.
    pub fn finish(self) -> Collected {
        let _ = self.to.send(Told::Upto(u64::MAX));
        drop(self.to);
        let collected = self.thread.join().unwrap_or_else(|_| Collected {
            records: Vec::new(),
            samples: 0,
            hits: 0,
            lost_mappings: 0,
            stackless_hits: 0,
        });
        Collected {
            stackless_hits: self.stackless.get(),
            ..collected
        }
    }
}

/// Counts one more at time `at` under `key`.
fn count_at<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, Count>, key: K, at: u64) {
    let count = counts.entry(key).or_insert(Count {
        count: 0,
        first: at,
        last: at,
    });
    count.count += 1;
    count.last = at;
}

/// One thing that happened, to be applied in time order.
enum Happened {
    Fork {
        parent: Pid,
        child: Pid,
    },
    /// A new program, whose test is what its command line or environment
    /// says, not what its old program marked.
    Exec(Pid),
    Seen(Seen),
    Sample(Sample),
    Hit(Hit),
    Mark(Mark),
    /// A process that exited at `at`, applied [`FORGET_AFTER`] later.
    Exit {
        pid: Pid,
        at: u64,
    },
}

/// How long after its exit a process's mappings are forgotten: samples
/// and probe hits come on rings of their own, and one the drain read late
/// must still find them.
const FORGET_AFTER: u64 = 1_000_000_000;

impl Happened {
    /// Of things at the same time, the tree changes before the mappings,
    /// and the mappings before the samples that may run in them.
    fn rank(&self) -> u8 {
        match self {
            Happened::Fork { .. } | Happened::Exec(_) | Happened::Seen(Seen::Exec { .. }) => 0,
            Happened::Seen(_) => 1,
            // In the order read: a process's marks and hits share a ring.
            Happened::Sample(_) | Happened::Hit(_) | Happened::Mark(_) => 2,
            Happened::Exit { .. } => 3,
        }
    }
}

/// A frame before it is named: where the code was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Place {
    Kernel(u64),
    /// A file offset in a module (an index into `Profiler::modules`).
    User(u32, u64),
    /// An address of no file: no known mapping covers it, or one with no
    /// file behind it (its module index), as JIT compilers write code in.
    Unknown(Pid, u64, Option<u32>),
}

#[derive(Debug, Clone, Copy)]
struct Count {
    count: u64,
    first: u64,
    last: u64,
}

impl Count {
    fn merge(&mut self, other: &Count) {
        self.count += other.count;
        self.first = self.first.min(other.first);
        self.last = self.last.max(other.last);
    }
}

struct Profiler {
    watches: Vec<MmapWatch>,
    start: u64,
    spaces: AddressSpaces,
    unwinder: Unwinder,
    /// Not yet applied, by (time, rank, arrival).
    waiting: BTreeMap<(u64, u8, u64), Happened>,
    arrivals: u64,
    /// The mapped files, by path, and their index.
    modules: Vec<Arc<str>>,
    module_ids: HashMap<Arc<str>, u32>,
    /// The test each process says runs in it now (see [`Mark`]); a fork
    /// starts in its parent's.
    tests: HashMap<Pid, Arc<str>>,
    counts: HashMap<(Pid, Test, Vec<Place>), Count>,
    samples: u64,
    /// Hits by process, test, probe and stack (empty without stacks).
    hit_counts: HashMap<(Pid, Test, u32, Vec<Place>), Count>,
    /// USDT hits by process, test, probe and arguments; past the bound of
    /// tuples kept, by process, test and probe only.
    arg_counts: HashMap<(Pid, Test, u32), ArgTuples>,
    hits: u64,
    calls: Calls,
    attempts: Attempts,
}

/// The test a process said ran in it at a sample or hit, if any.
type Test = Option<Arc<str>>;

/// Calls timed from a uprobe's hit to its uretprobe's on the same thread.
struct Calls {
    /// Each uretprobe's uprobe.
    entry_of: HashMap<u32, u32>,
    /// The uprobes that have a uretprobe.
    timed: HashSet<u32>,
    /// The entries not yet returned from, by thread and uprobe, the
    /// innermost last (recursion nests).
    open: HashMap<(Pid, u32), Vec<u64>>,
    /// The calls that returned, per process and uprobe.
    took: HashMap<(Pid, u32), Took>,
}

/// Calls that cannot return before their callers do: a thread deeper than
/// this in one function forgets its outermost entries.
const MAX_OPEN_CALLS: usize = 4096;

/// One process's returned calls of one function: its uretprobe, and the
/// times as [`ProbeLatency`] has them, the buckets by lower bound.
struct Took {
    ret: u32,
    count: u64,
    min: u64,
    max: u64,
    buckets: BTreeMap<u64, u64>,
}

impl Calls {
    fn new(pairs: Vec<(u32, u32)>) -> Calls {
        Calls {
            timed: pairs.iter().map(|&(entry, _)| entry).collect(),
            entry_of: pairs.into_iter().map(|(entry, ret)| (ret, entry)).collect(),
            open: HashMap::new(),
            took: HashMap::new(),
        }
    }

    /// Follows one hit, in time order.
    fn hit(&mut self, hit: &Hit) {
        let (pid, tid, at) = (hit.sample.pid, hit.sample.tid, hit.sample.timestamp);
        if self.timed.contains(&hit.probe) {
            let open = self.open.entry((tid, hit.probe)).or_default();
            if open.len() == MAX_OPEN_CALLS {
                open.remove(0);
            }
            open.push(at);
        }
        let Some(&entry) = self.entry_of.get(&hit.probe) else {
            return;
        };
        // A return whose entry was before the recording is not timed.
        let Some(since) = self.open.get_mut(&(tid, entry)).and_then(Vec::pop) else {
            return;
        };
        let ns = at.saturating_sub(since);
        let took = self.took.entry((pid, entry)).or_insert(Took {
            ret: hit.probe,
            count: 0,
            min: ns,
            max: ns,
            buckets: BTreeMap::new(),
        });
        took.count += 1;
        took.min = took.min.min(ns);
        took.max = took.max.max(ns);
        *took.buckets.entry(latency_bucket(ns)).or_default() += 1;
    }

    fn into_records(self) -> Vec<ProbeLatency> {
        let mut records: Vec<ProbeLatency> = self
            .took
            .into_iter()
            .map(|((pid, probe), took)| ProbeLatency {
                pid,
                probe,
                ret: took.ret,
                count: took.count,
                min: took.min,
                max: took.max,
                buckets: took
                    .buckets
                    .into_iter()
                    .map(|(lower, n)| [lower, n])
                    .collect(),
            })
            .collect();
        records.sort_by_key(|r| (r.pid, r.probe));
        records
    }
}

/// One process's hits of one USDT probe by their arguments.
#[derive(Default)]
struct ArgTuples {
    kept: HashMap<Vec<ArgValue>, u64>,
    other: u64,
}

impl Profiler {
    fn new(start: u64, calls: Calls, attempts: Attempts) -> Profiler {
        Profiler {
            watches: Vec::new(),
            start,
            spaces: AddressSpaces::new(),
            unwinder: Unwinder::new(),
            waiting: BTreeMap::new(),
            arrivals: 0,
            modules: Vec::new(),
            module_ids: HashMap::new(),
            tests: HashMap::new(),
            counts: HashMap::new(),
            samples: 0,
            hit_counts: HashMap::new(),
            arg_counts: HashMap::new(),
            hits: 0,
            calls,
            attempts,
        }
    }

    fn run(mut self, told: Receiver<Told>) -> Collected {
        loop {
            match told.recv_timeout(READ_MAPPINGS_EVERY) {
                Ok(Told::Watch(watch, mapped)) => {
                    self.watches.push(watch);
                    mapped.into_iter().for_each(|m| self.spaces.add(m));
                }
                Ok(Told::Sample(sample)) => self.wait(sample.timestamp, Happened::Sample(sample)),
                Ok(Told::Hit(hit)) => self.wait(hit.sample.timestamp, Happened::Hit(hit)),
                Ok(Told::Mark(mark)) => self.wait(mark.timestamp, Happened::Mark(mark)),
                Ok(Told::Fork { parent, child, at }) => {
                    self.wait(at, Happened::Fork { parent, child })
                }
                Ok(Told::Exec { pid, at }) => self.wait(at, Happened::Exec(pid)),
                Ok(Told::Exit { pid, at }) => {
                    self.wait(at.saturating_add(FORGET_AFTER), Happened::Exit { pid, at })
                }
                Ok(Told::Upto(at)) => {
                    self.read_mappings();
                    self.apply_upto(at);
                }
                Err(RecvTimeoutError::Timeout) => self.read_mappings(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.read_mappings();
        self.apply_upto(u64::MAX);
        self.finish()
    }

    fn wait(&mut self, at: u64, happened: Happened) {
        let key = (at, happened.rank(), self.arrivals);
        self.arrivals += 1;
        self.waiting.insert(key, happened);
    }

    /// The mappings the kernel has announced: every one made before a
    /// sample that was read is in by now.
    fn read_mappings(&mut self) {
        let mut seen = Vec::new();
        for watch in &mut self.watches {
            watch.drain(|s| seen.push(s));
        }
        let start = self.start;
        for mut s in seen {
            // The recording's own time, as the samples and events have it.
            let at = match &mut s {
                Seen::Exec { time, .. } => time,
                Seen::Mapped(mapping) => &mut mapping.time,
            };
            *at = at.saturating_sub(start);
            let at = *at;
            self.wait(at, Happened::Seen(s));
        }
    }

    fn apply_upto(&mut self, at: u64) {
        let later = self.waiting.split_off(&(at, u8::MAX, u64::MAX));
        let ready = std::mem::replace(&mut self.waiting, later);
        for ((time, _, _), happened) in ready {
            match happened {
                Happened::Fork { parent, child } => {
                    self.spaces.fork(parent, child, time);
                    if let Some(test) = self.tests.get(&parent).cloned() {
                        self.tests.insert(child, test);
                    }
                }
                Happened::Exec(pid) => {
                    self.tests.remove(&pid);
                }
                Happened::Seen(seen) => self.spaces.seen(seen),
                Happened::Sample(sample) => self.count(sample),
                Happened::Hit(hit) => self.count_hit(hit),
                Happened::Mark(mark) => self.mark(mark),
                Happened::Exit { pid, at } => {
                    self.tests.remove(&pid);
                    self.spaces.exit(pid, at);
                }
            }
        }
    }

    /// Unwinds one sample and counts its stack, leaf first.
    fn count(&mut self, sample: Sample) {
        let places = self.unwind(&sample);
        self.samples += 1;
        let test = self.test_of(sample.pid);
        count_at(
            &mut self.counts,
            (sample.pid, test, places),
            sample.timestamp,
        );
    }

    fn test_of(&self, pid: Pid) -> Test {
        self.tests.get(&pid).cloned()
    }

    /// Follows a process's word on its current test.
    fn mark(&mut self, mark: Mark) {
        match mark.test {
            // A test's next phase keeps the name every key shares.
            Some(test) if self.tests.get(&mark.pid).is_some_and(|t| **t == test) => {}
            Some(test) => {
                self.tests.insert(mark.pid, Arc::from(test));
            }
            None => {
                self.tests.remove(&mark.pid);
            }
        }
    }

    /// Counts one hit of a probe, in its stack and by its arguments.
    fn count_hit(&mut self, hit: Hit) {
        let places = self.unwind(&hit.sample);
        self.hits += 1;
        self.calls.hit(&hit);
        self.attempts.hit(&hit);
        let (pid, at) = (hit.sample.pid, hit.sample.timestamp);
        let test = self.test_of(pid);
        count_at(
            &mut self.hit_counts,
            (pid, test.clone(), hit.probe, places),
            at,
        );
        if !hit.args.is_empty() {
            let tuples = self.arg_counts.entry((pid, test, hit.probe)).or_default();
            if let Some(count) = tuples.kept.get_mut(&hit.args) {
                *count += 1;
            } else if tuples.kept.len() < ARG_TUPLES_KEPT {
                tuples.kept.insert(hit.args, 1);
            } else {
                tuples.other += 1;
            }
        }
    }

    /// The frames of a sample, the running one first: its kernel stack,
    /// then its user stack unwound against the mappings of the time.
    fn unwind(&mut self, sample: &Sample) -> Vec<Place> {
        let mut places: Vec<Place> = sample
            .kernel
            .iter()
            .enumerate()
            .map(|(i, &addr)| Place::Kernel(lookup_address(addr, i == 0)))
            .collect();
        let [ip, sp, fp, lr] = sample.regs;
        if ip != 0 {
            let modules: Vec<Module> = self
                .spaces
                .modules_at(sample.pid, sample.timestamp)
                .into_iter()
                .map(module_of)
                .collect();
            let regs = Regs { ip, sp, fp, lr };
            let addrs = self
                .unwinder
                .unwind(&modules, &regs, &sample.stack, MAX_USER_FRAMES);
            for (i, addr) in addrs.into_iter().enumerate() {
                let place = self.place(sample, lookup_address(addr, i == 0));
                places.push(place);
            }
        }
        places
    }

    /// Where `addr` of the sampled process was: a file offset in the
    /// mapping that covered it then.
    fn place(&mut self, sample: &Sample, addr: u64) -> Place {
        let mapping = self
            .spaces
            .mapping_at(sample.pid, sample.timestamp, addr)
            .map(|m| (addr - m.start + m.file_offset, m.path.clone()));
        let Some((offset, path)) = mapping else {
            return Place::Unknown(sample.pid, addr, None);
        };
        // `//anon`, `[vdso]`, `[anon:…]`: nothing on disk to read.
        let file = path.starts_with('/') && !path.starts_with("//");
        let id = self.module_id(&path);
        if file {
            Place::User(id, offset)
        } else {
            Place::Unknown(sample.pid, addr, Some(id))
        }
    }

    /// The index of the module at `path`, made on first sight.
    fn module_id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.module_ids.get(path) {
            return id;
        }
        let id = self.modules.len() as u32;
        let path: Arc<str> = Arc::from(path);
        self.module_ids.insert(Arc::clone(&path), id);
        self.modules.push(path);
        id
    }

    /// Names every place once and writes the profile's records.
    fn finish(self) -> Collected {
        let places = self.counts.keys().flat_map(|(_, _, p)| p);
        let hit_places = self.hit_counts.keys().flat_map(|(_, _, _, p)| p);
        let names = Names::of(&self.modules, places.chain(hit_places));
        let mut stacks = StackIds::default();
        // Places that name the same functions are one stack.
        let mut merged: HashMap<(Pid, Test, u32), Count> = HashMap::new();
        for ((pid, test, places), count) in &self.counts {
            let stack = stacks.of(&names, places);
            merge(&mut merged, (*pid, test.clone(), stack), count);
        }
        let mut merged_hits: HashMap<(Pid, Test, u32, Option<u32>), Count> = HashMap::new();
        for ((pid, test, probe, places), count) in &self.hit_counts {
            let stack = (!places.is_empty()).then(|| stacks.of(&names, places));
            merge(&mut merged_hits, (*pid, test.clone(), *probe, stack), count);
        }
        let mut samples: Vec<CpuSamples> = merged
            .into_iter()
            .map(|((pid, test, stack), count)| CpuSamples {
                pid,
                test: test.map(|t| t.to_string()),
                stack,
                count: count.count,
                first: count.first,
                last: count.last,
            })
            .collect();
        samples.sort_by(|a, b| {
            (a.pid, &a.test, b.count, a.stack).cmp(&(b.pid, &b.test, a.count, b.stack))
        });
        let mut hits: Vec<ProbeHits> = merged_hits
            .into_iter()
            .map(|((pid, test, probe, stack), count)| ProbeHits {
                pid,
                test: test.map(|t| t.to_string()),
                probe,
                stack,
                count: count.count,
                first: count.first,
                last: count.last,
            })
            .collect();
        hits.sort_by(|a, b| {
            (a.pid, &a.test, a.probe, b.count, a.stack)
                .cmp(&(b.pid, &b.test, b.probe, a.count, b.stack))
        });
        let mut records: Vec<Record> = names.table.into_iter().map(Record::Frame).collect();
        records.extend(stacks.into_records());
        records.extend(samples.into_iter().map(Record::CpuSamples));
        records.extend(hits.into_iter().map(Record::ProbeHits));
        records.extend(arg_records(self.arg_counts).map(Record::ProbeArgs));
        records.extend(
            self.calls
                .into_records()
                .into_iter()
                .map(Record::ProbeLatency),
        );
        let attempts = self.attempts.into_records();
        records.extend(attempts.into_iter().map(Record::TestAttempt));
        let lost_mappings: u64 = self.watches.iter().map(|w| w.lost() + w.garbled()).sum();
        Collected {
            records,
            samples: self.samples,
            hits: self.hits,
            lost_mappings,
            stackless_hits: 0,
        }
    }
}

fn merge<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, Count>, key: K, count: &Count) {
    counts
        .entry(key)
        .and_modify(|sum| sum.merge(count))
        .or_insert(*count);
}

/// The stacks of the recording, each numbered once by its frames.
#[derive(Default)]
struct StackIds(HashMap<Vec<u32>, u32>);

impl StackIds {
    /// The id of the stack of `places` (leaf first, as unwound; the
    /// record's stacks start at the root).
    fn of(&mut self, names: &Names, places: &[Place]) -> u32 {
        let frames: Vec<u32> = places
            .iter()
            .rev()
            .flat_map(|place| names.frames(place))
            .collect();
        let next = self.0.len() as u32;
        *self.0.entry(frames).or_insert(next)
    }

    fn into_records(self) -> impl Iterator<Item = Record> {
        let mut stacks: Vec<Stack> = self
            .0
            .into_iter()
            .map(|(frames, id)| Stack { id, frames })
            .collect();
        stacks.sort_by_key(|s| s.id);
        stacks.into_iter().map(Record::Stack)
    }
}

/// The USDT hits by arguments, most frequent first per process and probe,
/// the tuples past the bound in one record of their own.
fn arg_records(counts: HashMap<(Pid, Test, u32), ArgTuples>) -> impl Iterator<Item = ProbeArgs> {
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by(|(a, _), (b, _)| a.cmp(b));
    counts.into_iter().flat_map(|((pid, test, probe), tuples)| {
        let mut kept: Vec<(Vec<ArgValue>, u64)> = tuples.kept.into_iter().collect();
        kept.sort_by(|a, b| (b.1, &a.0).cmp(&(a.1, &b.0)));
        let line = move |args, other, count| ProbeArgs {
            pid,
            test: test.as_ref().map(|t| t.to_string()),
            probe,
            args,
            other,
            count,
        };
        let other = (tuples.other > 0).then(|| line(Vec::new(), true, tuples.other));
        kept.into_iter()
            .map(move |(args, count)| line(args, false, count))
            .chain(other)
    })
}

fn module_of(mapping: &Mapping) -> Module {
    Module {
        start: mapping.start,
        end: mapping.end,
        file_offset: mapping.file_offset,
        path: mapping.path.clone().into(),
        dev: mapping
            .dev
            .map_or(0, |(major, minor)| libc::makedev(major, minor)),
        ino: mapping.ino.unwrap_or(0),
        build_id: mapping.build_id.clone(),
    }
}

/// Every place named, as frames: a place with inlined calls is several.
struct Names {
    table: Vec<Frame>,
    /// Each frame's id by what makes it the same frame (see [`FrameKey`]).
    ids: HashMap<FrameKey, u32>,
    of: HashMap<Place, Vec<u32>>,
}

/// Frames are functions: every address a symbol names is one frame; an
/// address no symbol names is a frame of its own.
type FrameKey = (String, Option<String>, Option<u64>, bool, bool);

impl Names {
    fn of<'a>(modules: &[Arc<str>], places: impl Iterator<Item = &'a Place>) -> Names {
        let mut by_module: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        let mut kernel = Vec::new();
        let mut unknown = Vec::new();
        for place in places {
            match *place {
                Place::User(module, offset) => by_module.entry(module).or_default().push(offset),
                Place::Kernel(addr) => kernel.push(addr),
                Place::Unknown(pid, addr, module) => unknown.push((pid, addr, module)),
            }
        }
        let mut names = Names {
            table: Vec::new(),
            ids: HashMap::new(),
            of: HashMap::new(),
        };
        let mut symbolizer = Symbolizer::new();
        for (module, mut offsets) in by_module {
            offsets.sort_unstable();
            offsets.dedup();
            let path = &modules[module as usize];
            let symbols = symbolizer.user(std::path::Path::new(&**path), &offsets);
            for (offset, chain) in offsets.iter().zip(symbols) {
                let frames = chain
                    .into_iter()
                    .enumerate()
                    .map(|(i, symbol)| Frame {
                        id: 0,
                        offset: symbol.function.is_none().then_some(*offset),
                        function: symbol.function,
                        module: path.to_string(),
                        kernel: false,
                        // The chain is caller first: each after the first
                        // was inlined into the one before it.
                        inlined: i > 0,
                    })
                    .collect();
                names.add(Place::User(module, *offset), frames);
            }
        }
        kernel.sort_unstable();
        kernel.dedup();
        for (addr, symbol) in kernel.iter().zip(symbolizer.kernel(&kernel)) {
            let frame = Frame {
                id: 0,
                offset: symbol.function.is_none().then_some(*addr),
                function: symbol.function,
                module: "[kernel]".into(),
                kernel: true,
                inlined: false,
            };
            names.add(Place::Kernel(*addr), vec![frame]);
        }
        unknown.sort_unstable();
        unknown.dedup();
        // A runtime's perf map names its JIT code (Node's
        // --perf-basic-prof, Python's -X perf), after the process is gone.
        for (pid, addr, module) in unknown {
            let function = symbolizer.perf_map(pid as u32, &[addr]).pop().flatten();
            let frame = Frame {
                id: 0,
                offset: function.is_none().then_some(addr),
                function,
                module: module.map_or("[unknown]".into(), |m| modules[m as usize].to_string()),
                kernel: false,
                inlined: false,
            };
            names.add(Place::Unknown(pid, addr, module), vec![frame]);
        }
        names
    }

    /// Numbers `frames` (one per function, the outermost first) as the
    /// frames of `place`; alike frames share a number.
    fn add(&mut self, place: Place, frames: Vec<Frame>) {
        let ids = frames
            .into_iter()
            .map(|mut frame| {
                let key = (
                    frame.module.clone(),
                    frame.function.clone(),
                    frame.offset,
                    frame.kernel,
                    frame.inlined,
                );
                let next = self.table.len() as u32;
                let id = *self.ids.entry(key).or_insert(next);
                if id == next {
                    frame.id = id;
                    self.table.push(frame);
                }
                id
            })
            .collect();
        self.of.insert(place, ids);
    }

    fn frames(&self, place: &Place) -> Vec<u32> {
        self.of.get(place).cloned().unwrap_or_default()
    }
}
