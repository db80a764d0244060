//! The waits of a real `record --off-cpu` recording
//! (tests/fuzz-corpus/offcpu.ndjson) in the views that carry them beside
//! the CPU's: pprof's `offcpu` sample type and the HTML report's waits,
//! each adding up to the recording's own lines.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proctrace::event::{OffCpu, Record};

use crate::common::{read_records, render};

fn recording() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus/offcpu.ndjson")
}

/// The recording's `OffCpu` lines.
fn off_cpu_lines() -> Vec<OffCpu> {
    read_records(&recording())
        .into_iter()
        .filter_map(|record| match record {
            Record::OffCpu(line) => Some(line),
            _ => None,
        })
        .collect()
}

/// What the test reads of pprof's messages.
#[cfg(feature = "pprof")]
mod pprof {
    pub use crate::pprof_proto::{Profile, Sample};

    impl Profile {
        pub fn text(&self, index: i64) -> &str {
            &self.string_table[usize::try_from(index).unwrap()]
        }

        /// The name of the function of a sample's leaf.
        pub fn leaf(&self, sample: &Sample) -> &str {
            let location = self.location.iter().find(|l| l.id == sample.location_id[0]);
            let function_id = location.unwrap().line[0].function_id;
            let function = self.function.iter().find(|f| f.id == function_id);
            self.text(function.unwrap().name)
        }

        /// The value of a sample's label `key`.
        pub fn label<'a>(&'a self, sample: &Sample, key: &str) -> Option<&'a str> {
            let label = sample.label.iter().find(|l| self.text(l.key) == key)?;
            Some(self.text(label.str))
        }
    }
}

/// The pprof of a recording made with `--off-cpu` alone: one type,
/// `offcpu` in nanoseconds, whose samples add up to the lines' times, each
/// labelled with its reason and ending in it.
#[cfg(feature = "pprof")]
#[test]
fn pprof_has_the_waits_as_an_offcpu_sample_type() {
    use prost::Message;
    use std::io::Read;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("waits.pb.gz");
    render(&recording(), "pprof", &file);
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let profile = pprof::Profile::decode(&bytes[..]).unwrap();
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| (profile.text(t.r#type), profile.text(t.unit)))
        .collect();
    let offcpu = types.iter().position(|&t| t == ("offcpu", "nanoseconds"));
    let offcpu = offcpu.unwrap_or_else(|| panic!("{types:?}"));

    let lines = off_cpu_lines();
    let total: u64 = lines.iter().map(|l| l.total_ns).sum();
    assert!(total > 0);
    let values: i64 = profile.sample.iter().map(|s| s.value[offcpu]).sum();
    assert_eq!(u64::try_from(values).unwrap(), total);

    let recorded: BTreeSet<&str> = lines.iter().map(|l| l.reason.name()).collect();
    let labelled: BTreeSet<&str> = profile
        .sample
        .iter()
        .map(|s| {
            profile
                .label(s, "reason")
                .expect("a sample without a reason")
        })
        .collect();
    assert_eq!(labelled, recorded);
    for sample in &profile.sample {
        let reason = profile.label(sample, "reason").unwrap();
        assert_eq!(profile.leaf(sample), format!("[{reason}]"));
        assert!(profile.label(sample, "program").is_some());
    }
}

/// The HTML report's waits: the stacks waited in, each ending in its
/// reason, in microseconds, adding up to the file's time waited; and each
/// program's wall time split into its main thread's CPU and waits, which
/// add up to the file's lines of main threads.
#[test]
fn the_html_report_has_the_waits_and_their_split() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    render(&recording(), "html", &page);
    let page = std::fs::read_to_string(&page).unwrap();
    let start = r#"<script type="application/json" id="report-data">"#;
    let blob = &page[page.find(start).unwrap() + start.len()..];
    let blob = &blob[..blob.find("</script>").unwrap()];
    let report: serde_json::Value = serde_json::from_str(blob).unwrap();
    let waits = &report["waits"];
    let number = |value: &serde_json::Value| value.as_u64().unwrap();

    let lines = off_cpu_lines();
    let total: u64 = lines.iter().map(|l| l.total_ns).sum();
    assert_eq!(number(&waits["ns"]), total);
    // Whole microseconds of each process's stack: each line loses less
    // than one.
    let us = number(&waits["samples"]);
    let lost = u64::try_from(lines.len()).unwrap();
    assert!(
        us <= total / 1_000 && us + lost >= total / 1_000,
        "{us}µs of {total}ns"
    );
    let stacks = waits["stacks"].as_array().unwrap();
    let drawn: u64 = stacks.iter().map(|s| number(&s["samples"])).sum();
    assert_eq!(drawn + number(&waits["left_out_samples"]), us);
    let names = waits["names"].as_array().unwrap();
    let recorded: BTreeSet<String> = lines
        .iter()
        .map(|l| format!("[{}]", l.reason.name()))
        .collect();
    for stack in stacks {
        let leaf = number(stack["frames"].as_array().unwrap().last().unwrap());
        let leaf = names[usize::try_from(leaf).unwrap()].as_str().unwrap();
        assert!(recorded.contains(leaf), "{leaf} ends a stack");
    }

    // No runner named tests here: the split is the programs'.
    assert_eq!(waits["wall_of_tests"], false);
    let split = waits["wall"].as_array().unwrap();
    let mut cpu = 0;
    let mut waited = 0;
    for line in split {
        let by_reason: u64 = line["waits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| number(&w["ns"]))
            .sum();
        assert_eq!(
            number(&line["cpu_ns"]) + by_reason,
            number(&line["wall_ns"])
        );
        cpu += number(&line["cpu_ns"]);
        waited += by_reason;
    }
    let main = |pid, tid| pid == tid;
    let main_waits: u64 = lines
        .iter()
        .filter(|l| main(l.pid, l.tid))
        .map(|l| l.total_ns)
        .sum();
    let main_cpu: u64 = read_records(&recording())
        .iter()
        .filter_map(|record| match record {
            Record::OnCpu(ran) if main(ran.pid, ran.tid) => Some(ran.ns),
            _ => None,
        })
        .sum();
    assert_eq!((cpu, waited), (main_cpu, main_waits));
}
