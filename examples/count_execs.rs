//! Counts the execs of each program while a command runs.
//!
//! `sudo cargo run --example count_execs -- make -j4`

use std::collections::BTreeMap;

use proctrace::event::Record;
use proctrace::recorder::Recorder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let command: Vec<String> = std::env::args().skip(1).collect();
    if command.is_empty() {
        return Err("usage: count_execs CMD [ARGS...]".into());
    }
    let recording = Recorder::command(command).start()?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for record in recording.events() {
        if let Record::Exec(exec) = record {
            *counts.entry(exec.filename).or_default() += 1;
        }
    }
    let totals = recording.finish()?;
    let mut by_count: Vec<_> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (program, count) in by_count {
        println!("{count:>8}  {program}");
    }
    eprintln!("{} events, {} lost", totals.events, totals.lost);
    Ok(())
}
