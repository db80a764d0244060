//! The verifier's work per program stays within a committed budget: a
//! change that multiplies it (an unrolled loop, a state explosion across a
//! branch) fails here rather than as a slower start in a benchmark.

use std::collections::BTreeMap;
use std::fs;

use libbpf_rs::query::ProgInfoIter;
use nix::sys::signal::Signal;

use crate::common::*;
use proctrace::event::Pid;

/// Instructions the verifier may process per program (bpf_prog_info's
/// verified_insns, 5.16+), by the name the kernel keeps (15 characters):
/// about 1.5 times what 6.18 took when the budget was set. Programs this
/// kernel does not load (fexit, the exec walk without bpf_loop) have
/// none, so a new program fails here until it gets one; raise one only
/// with the reason in the commit.
const BUDGET: &[(&str, u32)] = &[
    ("fork_raw", 500),
    ("fork_btf", 500),
    ("exec_raw_loop", 2_400),
    ("exec_btf_loop", 2_400),
    ("exit_raw", 1_400),
    ("exit_btf", 1_400),
    ("setsid_tracepoi", 200),
    ("setpgid_tracepo", 1_900),
    ("sys_exit_raw", 2_200),
    ("sys_exit_btf", 2_200),
    ("mark_setenv", 200),
    ("mark_unsetenv", 150),
    ("mark_multi", 200),
    // Five instructions: a tail call into mark_multi.
    ("marks_jump", 10),
    ("offcpu_switch", 12_000),
    ("offcpu_waking", 3_000),
    ("offcpu_wakeup_n", 120),
    ("offcpu_exec", 60),
    // The interrupt counters' entries and exits (15 characters alike).
    ("offcpu_irq_entr", 40),
    ("offcpu_irq_exit", 40),
    ("offcpu_softirq_", 40),
    ("offcpu_timer_en", 40),
    ("offcpu_timer_ex", 40),
];

/// The programs a running `proctrace record` holds, through their own fds
/// or their links', by name, with the instructions each took to verify.
fn verified(proctrace: Pid) -> BTreeMap<String, u32> {
    let ids: Vec<u32> = fs::read_dir(format!("/proc/{proctrace}/fdinfo"))
        .unwrap()
        .filter_map(|entry| fs::read_to_string(entry.ok()?.path()).ok())
        .filter_map(|info| {
            let line = info.lines().find(|l| l.starts_with("prog_id:"))?;
            line["prog_id:".len()..].trim().parse().ok()
        })
        .collect();
    ProgInfoIter::default()
        .filter(|prog| ids.contains(&prog.id))
        .map(|prog| {
            (
                prog.name.to_string_lossy().into_owned(),
                prog.verified_insns,
            )
        })
        .collect()
}

fn within_budget(mode: Mode) {
    within_budget_with(Opts::new(mode));
}

fn within_budget_with(opts: Opts) {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::start(dir, &opts, &["sleep", "60"]);
    let sleep = live.wait_for_descendant("sleep");
    let programs = verified(live.pid());
    live.signal(Signal::SIGINT);
    let status = wait_bounded(&mut live.child, "proctrace record");
    live.finish(status);
    kill_if(sleep, &["sleep"]);

    assert!(programs.len() >= 4, "{programs:?}");
    for (name, &insns) in &programs {
        let budget = BUDGET.iter().find(|(n, _)| n == name).map(|&(_, b)| b);
        let budget =
            budget.unwrap_or_else(|| panic!("{name} has no verifier budget: {programs:?}"));
        assert!(insns > 0, "{name}: no verified_insns (kernel before 5.16?)");
        assert!(
            insns <= budget,
            "{name} took {insns} verified instructions, over its budget of {budget}"
        );
    }
}

per_mode!(within_budget:
    verifier_budget_ring => Ring,
    verifier_budget_btf_tracepoints => BtfTp,
    verifier_budget_sys_exit => SysExit,
);

/// The off-CPU programs (`record --off-cpu`), which run at every context
/// switch of the machine.
#[test]
fn offcpu_verifier_budget() {
    require_root();
    let mut opts = Opts::new(Mode::Ring);
    opts.args = strings(&["--off-cpu"]);
    within_budget_with(opts);
}
