//! Reads the kernel side's map of followed processes while a command
//! runs, through the stable route to it (`LiveRecording::tracked_map`):
//! how many processes of the tree the kernel followed at once, at most.
//!
//! `sudo cargo run --example tracked_pids -- make -j4`

use std::collections::BTreeSet;
use std::time::Duration;

use proctrace::event::{Pid, Record};
use proctrace::libbpf_rs::MapCore;
use proctrace::recorder::Recorder;

/// What the map showed while `command` ran.
pub struct Sampled {
    /// The most pids in the map at once.
    pub peak: usize,
    /// Every pid the map held.
    pub in_map: BTreeSet<Pid>,
    /// Every pid the recording's events name.
    pub recorded: BTreeSet<Pid>,
}

/// Records `command`, reading the map every few milliseconds.
pub fn sample(command: &[String]) -> Result<Sampled, Box<dyn std::error::Error>> {
    let recording = Recorder::command(command).start()?;
    let map = recording.tracked_map();
    let mut sampled = Sampled {
        peak: 0,
        in_map: BTreeSet::new(),
        recorded: BTreeSet::new(),
    };
    loop {
        let pids: BTreeSet<Pid> = map
            .keys()
            .filter_map(|key| Some(Pid::from_ne_bytes(key.try_into().ok()?)))
            .collect();
        sampled.peak = sampled.peak.max(pids.len());
        sampled.in_map.extend(pids);
        // The events must be taken, or the recording waits for us.
        match recording.events().recv_timeout(Duration::from_millis(5)) {
            Ok(record) => sampled.recorded.extend(pid_of(&record)),
            Err(err) if err.is_timeout() => {}
            Err(_) => break,
        }
        sampled
            .recorded
            .extend(recording.events().try_iter().filter_map(|r| pid_of(&r)));
    }
    recording.finish()?;
    Ok(sampled)
}

fn pid_of(record: &Record) -> Option<Pid> {
    match record {
        Record::Fork(fork) => Some(fork.child_pid),
        Record::Exec(exec) => Some(exec.pid),
        _ => None,
    }
}

#[allow(dead_code)] // the kernel tests take `sample` alone
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let command: Vec<String> = std::env::args().skip(1).collect();
    if command.is_empty() {
        return Err("usage: tracked_pids CMD [ARGS...]".into());
    }
    let sampled = sample(&command)?;
    println!(
        "{} processes followed at once at most, {} in all",
        sampled.peak,
        sampled.in_map.len()
    );
    Ok(())
}
