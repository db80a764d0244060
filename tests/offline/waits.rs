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
