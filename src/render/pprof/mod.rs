//! `pprof`: the CPU profile (`record --cpu-profile`) as a gzipped
//! `profile.proto`, the format of `go tool pprof`, Pyroscope, Parca and
//! Grafana's profiles drilldown.
//!
//! Two values per sample, as perf's and Go's CPU profiles have them: the
//! samples (`samples/count`) and the CPU time they stand for
//! (`cpu/nanoseconds`, each sample 1/hz of a second), the latter the one
//! readers show by default. With `record --probe`, one more per probe,
//! its hits (`uprobe:libc.so.6:malloc/hits`: `go tool pprof
//! -sample_index=…` picks one), each hit stack a sample of its own; a
//! recording of probes only has those alone. With `record --off-cpu`, one
//! more: the time waited (`offcpu/nanoseconds`), each line of waits a
//! sample whose leaf is its reason (`[sleep]`, as `offcpu-folded` has it)
//! and which a `reason` label names too; the waits kept without stacks
//! (shorter than the threshold, the time runnable) are the reason alone.
//! Every process's samples in one stack are one
//! pprof sample, labelled with the process (`pid`, a number), its program
//! (`program`) and, where a runner named one, its test (`test`), so that
//! `go tool pprof -tagfocus=test=…` or a Pyroscope query splits by them.
//! Where there is a CPU profile, its time is the type readers show first.
//!
//! A location is one place in the code: a frame and the frames the
//! recording says were inlined into it, as the lines of one location,
//! innermost first. Each function of each file is one pprof function,
//! named as the other views name it (`_[k]` on the kernel's, a file and
//! offset where no symbol named the code); each file is one mapping.
//! The recording keeps no addresses or line numbers for named code, so
//! mappings cover no address range and lines are 0: every mapping says it
//! has its functions, or pprof would try to name them again from
//! whatever binaries lie about on the reading machine.

mod proto;

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use prost::Message;

use super::cpu::headline;
use super::{Missing, Options};
use crate::analysis::{hit_stacks, sampled_stacks, waited_stacks};
use crate::event::{Frame, Pid, WaitReason};
use crate::recording::Recording;
use crate::text::{glance, shell_join};

/// Writes the profile, gzipped as pprof's readers expect it on disk.
pub fn render(recording: &Recording, _: Options, out: &mut dyn Write) -> io::Result<()> {
    let profile = build(recording).ok_or(Missing::CpuProfile)?;
    let mut gzip = GzEncoder::new(out, flate2::Compression::default());
    gzip.write_all(&profile.encode_to_vec())?;
    gzip.finish()?;
    Ok(())
}

/// The recording's CPU samples, probe hits and waits as pprof's
/// messages; `None` with none of them.
fn build(recording: &Recording) -> Option<proto::Profile> {
    let header = recording.header.as_ref()?;
    let cpu = header.cpu_profile;
    let probes = &header.probes;
    let hit = has_hits(recording);
    let off_cpu = header.off_cpu;
    if cpu.is_none() && !hit && off_cpu.is_none() {
        return None;
    }
    let mut builder = Builder::default();
    // Two values for the CPU (samples, and the time they stand for), then
    // one per probe: its hits, then the time waited. Every sample has
    // them all, 0 but its own.
    let mut sample_type = Vec::new();
    if cpu.is_some() {
        sample_type.push(builder.value_type("samples", "count"));
        sample_type.push(builder.value_type("cpu", "nanoseconds"));
    }
    let first_probe = sample_type.len();
    if hit {
        for probe in probes {
            sample_type.push(builder.value_type(&probe.label(), "hits"));
        }
    }
    let waited = sample_type.len();
    if off_cpu.is_some() {
        sample_type.push(builder.value_type("offcpu", "nanoseconds"));
    }
    let width = sample_type.len();
    let mut sample = Vec::new();
    if let Some(cpu) = cpu {
        cpu_samples(recording, cpu.hz, width, &mut builder, &mut sample);
    }
    if hit {
        hit_samples(recording, first_probe, width, &mut builder, &mut sample);
    }
    if off_cpu.is_some() {
        wait_samples(recording, waited, width, &mut builder, &mut sample);
    }
    let mut comment = vec![builder.string(&format!(
        "proctrace record: {}",
        shell_join(&header.command)
    ))];
    if let Some(headline) = headline(recording) {
        comment.push(builder.string(&headline));
    }
    if let Some(off_cpu) = off_cpu {
        comment.push(builder.string(&format!(
            "offcpu: the time waited, waits of {} or more with their stacks",
            glance(off_cpu.threshold_ns)
        )));
    }
    // pprof's readers show the last type unless told: the CPU time is
    // the one to show first where there is one.
    let default_sample_type = match cpu {
        Some(_) => builder.string("cpu"),
        None => 0,
    };
    let (period_type, period) = match cpu {
        Some(cpu) => (
            builder.value_type("cpu", "nanoseconds"),
            1_000_000_000 / i64::from(cpu.hz.max(1)),
        ),
        None => (sample_type[0].clone(), 1),
    };
    Some(proto::Profile {
        sample_type,
        sample,
        time_nanos: start_nanos(&header.start_time),
        duration_nanos: i64::try_from(recording.processes.wall_time()).unwrap_or(i64::MAX),
        period_type: Some(period_type),
        period,
        comment,
        default_sample_type,
        ..builder.finish()
    })
}

/// Whether the recording has hits of the probes its header names: each
/// is then a sample type, with or without a CPU profile.
pub(super) fn has_hits(recording: &Recording) -> bool {
    let probes = recording.header.as_ref().map_or(0, |h| h.probes.len());
    let hits = &recording.profile.probe_hits;
    hits.iter().any(|h| (h.probe as usize) < probes)
}

/// Each process's CPU samples in one stack, as one pprof sample: its
/// count and CPU time first of `width` values.
fn cpu_samples(
    recording: &Recording,
    hz: u32,
    width: usize,
    builder: &mut Builder,
    out: &mut Vec<proto::Sample>,
) {
    let profile = &recording.profile;
    // The program and test of each line, as every CPU view names them;
    // the frames themselves, for their files and inlining, from the
    // profile. Both in the order the recording has the lines.
    let named = sampled_stacks(profile, &recording.processes);
    for (samples_of, named) in profile.samples.iter().zip(named) {
        let frames = profile.stack(samples_of.stack);
        let mut value = vec![0; width];
        value[0] = i64::try_from(samples_of.count).unwrap_or(i64::MAX);
        value[1] = cpu_nanoseconds(samples_of.count, hz);
        let location_id = builder.stack(&frames);
        let test = named.test.as_deref();
        out.push(builder.sample(location_id, samples_of.pid, &named.program, test, value));
    }
}

/// Each process's hits of one probe in one stack, as one pprof sample:
/// its count as the value of that probe's type, `first` the first's.
fn hit_samples(
    recording: &Recording,
    first: usize,
    width: usize,
    builder: &mut Builder,
    out: &mut Vec<proto::Sample>,
) {
    let profile = &recording.profile;
    let probes = recording.header.as_ref().map_or(&[][..], |h| &h.probes);
    let named = hit_stacks(probes, profile, &recording.processes);
    let hits = profile
        .probe_hits
        .iter()
        .filter(|h| (h.probe as usize) < probes.len());
    for (hits, named) in hits.zip(named) {
        let frames = hits.stack.map(|s| profile.stack(s)).unwrap_or_default();
        let value = one_value(width, first + hits.probe as usize, hits.count);
        let location_id = builder.stack(&frames);
        let test = named.test.as_deref();
        out.push(builder.sample(location_id, hits.pid, &named.program, test, value));
    }
}

/// Each line of waits, as one pprof sample: its time as the value at
/// `index`, its reason the leaf below its stack and a label.
fn wait_samples(
    recording: &Recording,
    index: usize,
    width: usize,
    builder: &mut Builder,
    out: &mut Vec<proto::Sample>,
) {
    let profile = &recording.profile;
    let named = waited_stacks(profile, &recording.processes);
    for (line, named) in profile.off_cpu.iter().zip(named) {
        let frames = line.stack.map(|s| profile.stack(s)).unwrap_or_default();
        let value = one_value(width, index, line.total_ns);
        // The stack's first, whose mappings pprof names the profile by.
        let stack = builder.stack(&frames);
        let location_id = std::iter::once(builder.reason(line.reason))
            .chain(stack)
            .collect();
        let test = named.test.as_deref();
        let mut sample = builder.sample(location_id, line.pid, &named.program, test, value);
        sample
            .label
            .push(builder.text("reason", line.reason.name()));
        out.push(sample);
    }
}

/// `width` values, 0 but `value` at `index`: a sample of one type.
fn one_value(width: usize, index: usize, value: u64) -> Vec<i64> {
    let mut values = vec![0; width];
    values[index] = i64::try_from(value).unwrap_or(i64::MAX);
    values
}

/// The CPU time `count` samples at `hz` stand for, rounded to the
/// nanosecond per sample group rather than per sample, so that 999 Hz
/// does not lose a nanosecond a sample.
fn cpu_nanoseconds(count: u64, hz: u32) -> i64 {
    let ns = u128::from(count) * 1_000_000_000 / u128::from(hz.max(1));
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// The header's start (RFC 3339) in nanoseconds since the epoch; 0, "not
/// known" to pprof, where it does not read.
fn start_nanos(start_time: &str) -> i64 {
    humantime::parse_rfc3339_weak(start_time)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

/// The tables a profile refers into, each entry made once.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<String, u64>,
    functions: Vec<proto::Function>,
    /// (name, module) -> function id.
    function_ids: HashMap<(String, String), u64>,
    locations: Vec<proto::Location>,
    /// A frame and the frames inlined into it, by frame id, outermost
    /// first -> location id.
    location_ids: HashMap<Vec<u32>, u64>,
    /// A wait's reason -> the location of its pseudo-frame.
    reason_ids: HashMap<WaitReason, u64>,
}

impl Builder {
    /// The index of `text` in the string table, whose first entry is "".
    fn string(&mut self, text: &str) -> i64 {
        if self.strings.is_empty() {
            self.strings.push(String::new());
            self.string_ids.insert(String::new(), 0);
        }
        if let Some(&id) = self.string_ids.get(text) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(text.to_owned());
        self.string_ids.insert(text.to_owned(), id);
        id
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(kind),
            unit: self.string(unit),
        }
    }

    fn text(&mut self, key: &str, value: &str) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: self.string(value),
            ..proto::Label::default()
        }
    }

    fn number(&mut self, key: &str, value: i64) -> proto::Label {
        proto::Label {
            key: self.string(key),
            num: value,
            ..proto::Label::default()
        }
    }

    /// One sample of the locations `location_id`, leaf first, labelled
    /// with the process, its program and its test, as every view names
    /// them.
    fn sample(
        &mut self,
        location_id: Vec<u64>,
        pid: Pid,
        program: &str,
        test: Option<&str>,
        value: Vec<i64>,
    ) -> proto::Sample {
        let mut label = vec![
            self.number("pid", i64::from(pid)),
            self.text("program", program),
        ];
        if let Some(test) = test {
            label.push(self.text("test", test));
        }
        proto::Sample {
            location_id,
            value,
            label,
        }
    }

    /// The location ids of a stack given outermost caller first, leaf
    /// first as pprof has them: a frame and the frames inlined into it
    /// (each marked `inlined`, following the one it was inlined into)
    /// are one location.
    fn stack(&mut self, frames: &[&Frame]) -> Vec<u64> {
        let mut places: Vec<Vec<&Frame>> = Vec::new();
        for &frame in frames {
            match places.last_mut() {
                Some(place) if frame.inlined => place.push(frame),
                _ => places.push(vec![frame]),
            }
        }
        // Made outermost first, so that the first mapping is the file of
        // the first stack's outermost caller, the program, which pprof
        // names the profile after.
        let mut ids: Vec<u64> = places.iter().map(|place| self.location(place)).collect();
        ids.reverse();
        ids
    }

    /// The location of one place: `place[0]` the function whose code it
    /// is, each next one inlined into the one before.
    fn location(&mut self, place: &[&Frame]) -> u64 {
        let key: Vec<u32> = place.iter().map(|f| f.id).collect();
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let outer = place[0];
        let mapping_id = self.mapping(&outer.module, place.len() > 1);
        let line = place
            .iter()
            .rev()
            .map(|frame| proto::Line {
                function_id: self.function(frame),
                line: 0,
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            // The file offset, where that is all the recording knows of
            // the code: pprof shows it with the mapping's name.
            address: outer.offset.unwrap_or(0),
            line,
        });
        self.location_ids.insert(key, id);
        id
    }

    /// The location of a wait's reason, `[sleep]`: a function of its own,
    /// as `offcpu-folded` ends a stack with it, in no mapping (no file
    /// holds it: pprof lets a location say its mapping does not apply).
    fn reason(&mut self, reason: WaitReason) -> u64 {
        if let Some(&id) = self.reason_ids.get(&reason) {
            return id;
        }
        let name = self.string(&format!("[{}]", reason.name()));
        let function_id = self.functions.len() as u64 + 1;
        self.functions.push(proto::Function {
            id: function_id,
            name,
            system_name: name,
            ..proto::Function::default()
        });
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![proto::Line {
                function_id,
                line: 0,
            }],
        });
        self.reason_ids.insert(reason, id);
        id
    }

    fn mapping(&mut self, module: &str, inlined: bool) -> u64 {
        if let Some(&id) = self.mapping_ids.get(module) {
            let mapping = &mut self.mappings[id as usize - 1];
            mapping.has_inline_frames |= inlined;
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(module);
        self.mappings.push(proto::Mapping {
            id,
            filename,
            has_functions: true,
            has_inline_frames: inlined,
            ..proto::Mapping::default()
        });
        self.mapping_ids.insert(module.to_owned(), id);
        id
    }

    fn function(&mut self, frame: &Frame) -> u64 {
        let name = frame.label();
        let key = (name, frame.module.clone());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = self.string(&key.0);
        // The symbol itself, without the kernel's `_[k]`; there is no
        // mangled name to give, the recording keeps the demangled one.
        let system_name = match &frame.function {
            Some(function) => self.string(function),
            None => name,
        };
        self.functions.push(proto::Function {
            id,
            name,
            system_name,
            ..proto::Function::default()
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The tables, for the rest of the profile to be added to.
    fn finish(mut self) -> proto::Profile {
        self.string("");
        proto::Profile {
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            ..proto::Profile::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Read};

    use prost::Message;

    use super::{proto, render};
    use crate::recording::{Keep, Reader, Recording};
    use crate::render::Options;
    use crate::render::{Missing, Mode};

    /// `hot` (pid 10) runs `cc` (pid 11) in a pytest test; `hot` is
    /// sampled in two stacks through `work`, with `helper` inlined into
    /// it, once into the kernel; `cc` in code no symbol names.
    const RECORDING: &str = r#"{"Header":{"format_version":1,"proctrace_version":"0.1.0","start_time":"2026-11-21T07:40:00.5Z","root_pid":10,"command":["hot","1000"],"kernel":"6.1.0","raw":false,"buffer":"ring","cpu_profile":{"hz":100,"clock":"cpu-clock"}}}
{"Exec":{"seq":0,"timestamp":1000,"pid":10,"ppid":1,"pgid":10,"sid":10,"filename":"/usr/bin/hot","argv":["hot","1000"],"cmdline":"hot 1000","argv_truncated":false}}
{"Fork":{"seq":1,"timestamp":2000,"parent_pid":10,"child_pid":11,"parent_pgid":10,"child_pgid":10,"child_sid":10}}
{"Exec":{"seq":2,"timestamp":3000,"pid":11,"ppid":10,"pgid":10,"sid":10,"filename":"/usr/bin/cc","argv":["cc","-c","x.c"],"cmdline":"cc -c x.c","argv_truncated":false,"env":{"PYTEST_CURRENT_TEST":"t/test_x.py::test_cc (call)"}}}
{"Exit":{"seq":3,"timestamp":500000000,"pid":11,"ppid":10,"pgid":10,"sid":10,"exit_code":0,"signal":null,"core_dumped":false}}
{"Exit":{"seq":4,"timestamp":1000000000,"pid":10,"ppid":1,"pgid":10,"sid":10,"exit_code":0,"signal":null,"core_dumped":false}}
{"Frame":{"id":1,"function":"main","module":"/usr/bin/hot"}}
{"Frame":{"id":2,"function":"work","module":"/usr/bin/hot"}}
{"Frame":{"id":3,"function":"helper","module":"/usr/bin/hot","inlined":true}}
{"Frame":{"id":4,"function":"spin","module":"/usr/bin/hot"}}
{"Frame":{"id":5,"function":"clear_page_erms","module":"[kernel]","kernel":true}}
{"Frame":{"id":6,"module":"/usr/lib/libc.so.6","offset":6699}}
{"Stack":{"id":1,"frames":[1,2,3,4]}}
{"Stack":{"id":2,"frames":[1,2,3,5]}}
{"Stack":{"id":3,"frames":[6]}}
{"CpuSamples":{"pid":10,"stack":1,"count":30,"first":10000,"last":900000000}}
{"CpuSamples":{"pid":10,"stack":2,"count":10,"first":20000,"last":800000000}}
{"CpuSamples":{"pid":11,"stack":3,"count":5,"first":4000,"last":400000000}}
{"Trailer":{"events":5,"lost":0,"end_timestamp":1000001000,"interrupted":false,"root_exit_code":0,"root_signal":null,"lost_samples":2}}
"#;

    fn read(text: &str) -> Recording {
        let mut reader = Reader::new(Cursor::new(text.as_bytes().to_vec()), "test");
        Recording::read(&mut reader, Keep::Processes).unwrap()
    }

    /// What a reader of the file gets: gunzipped, decoded.
    fn decode(recording: &Recording) -> proto::Profile {
        let mut gzipped = Vec::new();
        render(recording, Options::default(), &mut gzipped).unwrap();
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(&gzipped[..])
            .read_to_end(&mut bytes)
            .unwrap();
        proto::Profile::decode(&bytes[..]).unwrap()
    }

    /// The profile's strings, resolved.
    struct Strings<'a>(&'a proto::Profile);

    impl Strings<'_> {
        fn get(&self, index: i64) -> &str {
            &self.0.string_table[usize::try_from(index).unwrap()]
        }

        /// The function names of each location of `sample`, leaf first,
        /// each location's innermost first.
        fn stack(&self, sample: &proto::Sample) -> Vec<Vec<&str>> {
            let p = self.0;
            sample
                .location_id
                .iter()
                .map(|&id| {
                    let location = p.location.iter().find(|l| l.id == id).unwrap();
                    location
                        .line
                        .iter()
                        .map(|line| {
                            let f = p.function.iter().find(|f| f.id == line.function_id);
                            self.get(f.unwrap().name)
                        })
                        .collect()
                })
                .collect()
        }

        /// `key=value` for each label of `sample`.
        fn labels(&self, sample: &proto::Sample) -> Vec<String> {
            sample
                .label
                .iter()
                .map(|l| match l.str {
                    0 => format!("{}={}", self.get(l.key), l.num),
                    s => format!("{}={}", self.get(l.key), self.get(s)),
                })
                .collect()
        }

        fn mapping(&self, location_id: u64) -> &str {
            let p = self.0;
            let location = p.location.iter().find(|l| l.id == location_id).unwrap();
            let mapping = p.mapping.iter().find(|m| m.id == location.mapping_id);
            self.get(mapping.unwrap().filename)
        }
    }

    #[test]
    fn samples_are_leaf_first_with_inlined_frames_as_lines_and_labelled() {
        let profile = decode(&read(RECORDING));
        let s = Strings(&profile);
        assert_eq!(profile.string_table[0], "");
        let types: Vec<(&str, &str)> = profile
            .sample_type
            .iter()
            .map(|t| (s.get(t.r#type), s.get(t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
        let period_type = profile.period_type.as_ref().unwrap();
        assert_eq!(
            (s.get(period_type.r#type), s.get(period_type.unit)),
            ("cpu", "nanoseconds")
        );
        assert_eq!(profile.period, 10_000_000, "100 Hz");
        // 2026-11-21T07:40:00.5Z
        assert_eq!(profile.time_nanos, 1_795_246_800_500_000_000);
        assert_eq!(
            profile.duration_nanos, 1_000_000_000,
            "first start to the end"
        );

        let [hot, kernel, cc] = &profile.sample[..] else {
            panic!("{:?}", profile.sample);
        };
        assert_eq!(hot.value, [30, 300_000_000]);
        assert_eq!(
            s.stack(hot),
            [vec!["spin"], vec!["helper", "work"], vec!["main"]]
        );
        assert_eq!(s.labels(hot), ["pid=10", "program=hot"]);
        assert_eq!(kernel.value, [10, 100_000_000]);
        assert_eq!(
            s.stack(kernel),
            [
                vec!["clear_page_erms_[k]"],
                vec!["helper", "work"],
                vec!["main"]
            ]
        );
        assert_eq!(s.mapping(kernel.location_id[0]), "[kernel]");
        assert_eq!(s.mapping(kernel.location_id[1]), "/usr/bin/hot");
        // The same place in two stacks is one location.
        assert_eq!(hot.location_id[1..], kernel.location_id[1..]);
        assert_eq!(s.stack(cc), [vec!["libc.so.6+0x1a2b"]]);
        assert_eq!(
            s.labels(cc),
            ["pid=11", "program=cc", "test=t/test_x.py::test_cc"]
        );
        let unnamed = profile.location.iter().find(|l| l.id == cc.location_id[0]);
        assert_eq!(unnamed.unwrap().address, 0x1a2b);

        assert_eq!(profile.location.len(), 5);
        assert_eq!(profile.function.len(), 6);
        let mappings: Vec<(&str, bool, bool)> = profile
            .mapping
            .iter()
            .map(|m| (s.get(m.filename), m.has_functions, m.has_inline_frames))
            .collect();
        assert_eq!(
            mappings,
            [
                ("/usr/bin/hot", true, true),
                ("[kernel]", true, false),
                ("/usr/lib/libc.so.6", true, false)
            ]
        );
        let kernel_function = profile
            .function
            .iter()
            .find(|f| s.get(f.name) == "clear_page_erms_[k]")
            .unwrap();
        assert_eq!(s.get(kernel_function.system_name), "clear_page_erms");
        let comments: Vec<&str> = profile.comment.iter().map(|&c| s.get(c)).collect();
        assert_eq!(
            comments,
            [
                "proctrace record: hot 1000",
                "45 samples of 2 processes at 100 Hz (cpu-clock), 2 lost"
            ]
        );
    }

    #[test]
    fn every_id_is_nonzero_and_resolves() {
        let profile = decode(&read(RECORDING));
        let ids = |ids: Vec<u64>| {
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), ids.len(), "duplicate ids {ids:?}");
            assert!(!ids.contains(&0));
            sorted
        };
        let mappings = ids(profile.mapping.iter().map(|m| m.id).collect());
        let functions = ids(profile.function.iter().map(|f| f.id).collect());
        let locations = ids(profile.location.iter().map(|l| l.id).collect());
        for location in &profile.location {
            assert!(mappings.contains(&location.mapping_id));
            for line in &location.line {
                assert!(functions.contains(&line.function_id));
            }
        }
        for sample in &profile.sample {
            assert_eq!(sample.value.len(), profile.sample_type.len());
            assert!(sample.location_id.iter().all(|id| locations.contains(id)));
        }
        let strings = profile.string_table.len() as i64;
        let indices = profile
            .function
            .iter()
            .flat_map(|f| [f.name, f.system_name])
            .chain(profile.mapping.iter().map(|m| m.filename))
            .chain(
                profile
                    .sample
                    .iter()
                    .flat_map(|s| s.label.iter().flat_map(|l| [l.key, l.str])),
            );
        assert!(indices.into_iter().all(|i| (0..strings).contains(&i)));
    }

    #[test]
    fn a_recording_without_a_profile_is_refused_by_a_typed_error() {
        let text: String = RECORDING
            .lines()
            .filter(|line| !line.starts_with(r#"{"Frame"#) && !line.starts_with(r#"{"Stack"#))
            .filter(|line| !line.starts_with(r#"{"CpuSamples"#))
            .map(|line| line.replace(r#","cpu_profile":{"hz":100,"clock":"cpu-clock"}"#, "") + "\n")
            .collect();
        let mut out = Vec::new();
        let err = crate::render::render(Mode::Pprof, &read(&text), Options::default(), &mut out)
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        let missing = err.get_ref().unwrap().downcast_ref::<Missing>();
        assert_eq!(missing, Some(&Missing::CpuProfile));
        assert!(out.is_empty(), "nothing written");
    }

    #[test]
    fn a_profile_without_samples_is_a_valid_empty_profile() {
        let text: String = RECORDING
            .lines()
            .filter(|line| !line.starts_with(r#"{"CpuSamples"#))
            .map(|line| format!("{line}\n"))
            .collect();
        let profile = decode(&read(&text));
        assert!(profile.sample.is_empty() && profile.location.is_empty());
        assert_eq!(profile.sample_type.len(), 2);
    }

    /// With a probe, each hit stack is a sample valued in the probe's own
    /// type, after the CPU's two; a recording of probes only has those.
    #[test]
    fn each_probe_is_a_sample_type_of_its_hits() {
        let probe = r#""probes":[{"id":0,"spec":"uprobe:libc:malloc","kind":"uprobe","file":"/usr/lib/libc.so.6","name":"malloc"}],"#;
        let hits =
            r#"{"ProbeHits":{"pid":10,"probe":0,"stack":1,"count":7,"first":10000,"last":20000}}"#;
        let with_probe = RECORDING
            .replacen(r#""raw":false,"#, &format!(r#""raw":false,{probe}"#), 1)
            .replacen(r#"{"Trailer""#, &format!("{hits}\n{{\"Trailer\""), 1);
        let profile = decode(&read(&with_probe));
        let s = |i: i64| profile.string_table[i as usize].clone();
        let types: Vec<(String, String)> = profile
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        let malloc = ("uprobe:libc.so.6:malloc".to_owned(), "hits".to_owned());
        assert_eq!(types[2], malloc, "{types:?}");
        let valued: Vec<&Vec<i64>> = profile.sample.iter().map(|p| &p.value).collect();
        assert!(valued.contains(&&vec![0, 0, 7]), "{valued:?}");
        assert!(valued.iter().all(|v| v.len() == 3));

        let unprofiled =
            with_probe.replacen(r#","cpu_profile":{"hz":100,"clock":"cpu-clock"}"#, "", 1);
        let profile = decode(&read(&unprofiled));
        assert_eq!(profile.sample_type.len(), 1);
        assert_eq!(profile.sample.len(), 1);
        assert_eq!(profile.sample[0].value, [7]);
    }

    /// With `--off-cpu`, the time waited is a type after the CPU's, the
    /// CPU's still the one shown first; each line a sample ending in its
    /// reason, a wait without a stack the reason alone; without a CPU
    /// profile, the waits alone.
    #[test]
    fn the_waits_are_a_sample_type_ending_in_their_reasons() {
        let waits = concat!(
            r#"{"OffCpu":{"pid":10,"tid":10,"reason":"pipe","call":"read","stack":1,"count":2,"total_ns":5000000,"max_ns":4000000}}"#,
            "\n",
            r#"{"OffCpu":{"pid":11,"tid":11,"test":"t/test_x.py::test_cc","reason":"runnable","count":3,"total_ns":700,"max_ns":0}}"#,
            "\n",
        );
        let with_waits = RECORDING
            .replacen(
                r#""raw":false,"#,
                r#""raw":false,"off_cpu":{"threshold_ns":1000000},"#,
                1,
            )
            .replacen(r#"{"Trailer""#, &format!("{waits}{{\"Trailer\""), 1);
        let profile = decode(&read(&with_waits));
        let s = Strings(&profile);
        let types: Vec<(&str, &str)> = profile
            .sample_type
            .iter()
            .map(|t| (s.get(t.r#type), s.get(t.unit)))
            .collect();
        assert_eq!(
            types,
            [
                ("samples", "count"),
                ("cpu", "nanoseconds"),
                ("offcpu", "nanoseconds")
            ]
        );
        assert_eq!(s.get(profile.default_sample_type), "cpu");
        let [.., pipe, runnable] = &profile.sample[..] else {
            panic!("{:?}", profile.sample);
        };
        assert_eq!(pipe.value, [0, 0, 5_000_000]);
        assert_eq!(
            s.stack(pipe),
            [
                vec!["[pipe]"],
                vec!["spin"],
                vec!["helper", "work"],
                vec!["main"]
            ]
        );
        assert_eq!(s.labels(pipe), ["pid=10", "program=hot", "reason=pipe"]);
        assert_eq!(runnable.value, [0, 0, 700]);
        assert_eq!(s.stack(runnable), [vec!["[runnable]"]]);
        assert_eq!(
            s.labels(runnable),
            [
                "pid=11",
                "program=cc",
                "test=t/test_x.py::test_cc",
                "reason=runnable"
            ]
        );
        let reason = profile
            .location
            .iter()
            .find(|l| l.id == runnable.location_id[0]);
        assert_eq!(reason.unwrap().mapping_id, 0, "no file holds a reason");

        let unprofiled = with_waits
            .replacen(r#","cpu_profile":{"hz":100,"clock":"cpu-clock"}"#, "", 1)
            .lines()
            .filter(|line| !line.starts_with(r#"{"CpuSamples"#))
            .map(|line| format!("{line}\n"))
            .collect::<String>();
        let recording = read(&unprofiled);
        assert_eq!(Mode::Pprof.missing(&recording, Options::default()), None);
        let profile = decode(&recording);
        assert_eq!(profile.sample_type.len(), 1);
        let values: Vec<&[i64]> = profile.sample.iter().map(|p| &p.value[..]).collect();
        assert_eq!(values, [[5_000_000], [700]]);
        assert_eq!(profile.default_sample_type, 0, "the only type");
    }
}
