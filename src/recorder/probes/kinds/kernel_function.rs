//! Kernel functions: `kprobe:FUNCTION` and `kretprobe:FUNCTION` fire at a
//! function's entry and returns through the kernel's kprobes (where it
//! is built with them), `fentry:FUNCTION` and `fexit:FUNCTION` through
//! its BPF trampoline (where the kernel has them and lets proctrace load
//! such programs). Functions are found by name or pattern in
//! `/proc/kallsyms`. A kprobe's program is shared and its cookie says
//! which probe fired (before Linux 5.15, a copy per probe); a trampoline
//! program is attached to its function as it loads, so each fentry or
//! fexit probe has a copy of its own, of the PROBE_COPIES there are.

use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use libbpf_rs::libbpf_sys::{
    bpf_insn, bpf_prog_load, bpf_prog_load_opts, bpf_raw_tracepoint_open,
    libbpf_find_vmlinux_btf_id, BPF_FUNC_loop, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY,
};
use libbpf_rs::{KprobeOpts, Link, OpenProgramMut, ProgramAttachType, ProgramType};

use super::{function_value, not_its_place, program_named, Kind};
use crate::bpf::types::probe_limits;
use crate::bpf::{OpenProctraceProgs, ProctraceSkel};
use crate::event::ProbeKind;
use crate::recorder::probes::pattern::{glob_match, is_pattern};
use crate::recorder::probes::point::{Found, Place, Resolved, Target, Value};
use crate::recorder::probes::ProbeError;

/// How a kernel function is probed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Kprobe,
    Trampoline,
}

/// A kernel function's entry, or with `ret` its returns.
pub(super) struct KernelFunction {
    via: Via,
    ret: bool,
}

pub(super) static KPROBE: KernelFunction = KernelFunction {
    via: Via::Kprobe,
    ret: false,
};
pub(super) static KRETPROBE: KernelFunction = KernelFunction {
    via: Via::Kprobe,
    ret: true,
};
pub(super) static FENTRY: KernelFunction = KernelFunction {
    via: Via::Trampoline,
    ret: false,
};
pub(super) static FEXIT: KernelFunction = KernelFunction {
    via: Via::Trampoline,
    ret: true,
};

/// Where the kernel lists its kprobe PMU, which attaches kprobes.
const KPROBE_PMU: &str = "/sys/bus/event_source/devices/kprobe";

impl Kind for KernelFunction {
    fn kind(&self) -> ProbeKind {
        match (self.via, self.ret) {
            (Via::Kprobe, false) => ProbeKind::Kprobe,
            (Via::Kprobe, true) => ProbeKind::Kretprobe,
            (Via::Trampoline, false) => ProbeKind::Fentry,
            (Via::Trampoline, true) => ProbeKind::Fexit,
        }
    }

    fn prefixes(&self) -> &'static [&'static str] {
        match (self.via, self.ret) {
            (Via::Kprobe, false) => &["kprobe", "k"],
            (Via::Kprobe, true) => &["kretprobe", "kr"],
            (Via::Trampoline, false) => &["fentry", "f", "kfunc"],
            (Via::Trampoline, true) => &["fexit", "fr", "kretfunc"],
        }
    }

    fn syntax(&self) -> &'static str {
        match (self.via, self.ret) {
            (Via::Kprobe, false) => "kprobe:FUNCTION",
            (Via::Kprobe, true) => "kretprobe:FUNCTION",
            (Via::Trampoline, false) => "fentry:FUNCTION",
            (Via::Trampoline, true) => "fexit:FUNCTION",
        }
    }

    fn parse(&self, rest: &str) -> Result<(Option<String>, Target), String> {
        if rest.is_empty() {
            return Err("no FUNCTION".into());
        }
        if rest.contains(':') {
            return Err(format!(
                "expected {} (a function of the kernel, found in any module)",
                self.syntax()
            ));
        }
        if rest.contains('+') {
            return Err("a kernel function is probed at its entry or returns: no +OFFSET".into());
        }
        let target = Target::Function {
            pattern: rest.to_owned(),
            offset: 0,
        };
        Ok((None, target))
    }

    fn what(&self) -> &'static str {
        "function"
    }

    fn resolve(&self, _: Option<&Path>, target: &Target) -> Result<Vec<Found>, String> {
        let Target::Function { pattern, .. } = target else {
            return Ok(Vec::new());
        };
        let kallsyms = fs::read_to_string("/proc/kallsyms")
            .map_err(|err| format!("reading /proc/kallsyms: {err}"))?;
        Ok(functions(&kallsyms, pattern)
            .into_iter()
            .map(|name| Found {
                place: Place::KernelFunction(name.clone()),
                name,
                symbol: None,
            })
            .collect())
    }

    fn check(&self, points: &[&Resolved], _: bool) -> Result<(), ProbeError> {
        let refused = |point: &Resolved, why: String| ProbeError::ProbeKernel {
            probe: point.point.spec.clone(),
            why,
        };
        for (i, point) in points.iter().enumerate() {
            let why = match self.via {
                Via::Kprobe if !Path::new(KPROBE_PMU).exists() => Some(format!(
                    "this kernel has no kprobes (built without CONFIG_KPROBES: {KPROBE_PMU} is \
                     missing): fentry:FUNCTION where it has BPF trampolines, or \
                     tracepoint:CATEGORY:NAME"
                )),
                Via::Kprobe => None,
                Via::Trampoline => trampoline_refusal(point, i == 0),
            };
            if let Some(why) = why {
                return Err(refused(point, why));
            }
        }
        Ok(())
    }

    fn value(&self, _: &Found, name: &str) -> Result<Value, String> {
        let called = match self.kind() {
            ProbeKind::Kprobe => "a kprobe",
            ProbeKind::Kretprobe => "a kretprobe",
            ProbeKind::Fentry => "an fentry probe",
            _ => "an fexit probe",
        };
        function_value(self.ret, name, called)
    }

    fn configure(&self, progs: &mut OpenProctraceProgs<'_>, points: &[&Resolved], cookies: bool) {
        if self.via == Via::Kprobe && !points.is_empty() && cookies {
            progs.probe_kprobe.set_autoload(true);
        }
    }

    fn copy(&self, point: &Resolved, cookies: bool) -> Option<String> {
        let id = point.point.id;
        match self.via {
            Via::Kprobe => (!cookies).then(|| format!("probe_kprobe_{id}")),
            Via::Trampoline => Some(format!("probe_fentry_{id}")),
        }
    }

    fn prepare_copy(
        &self,
        prog: &mut OpenProgramMut<'_>,
        point: &Resolved,
    ) -> libbpf_rs::Result<()> {
        let Place::KernelFunction(function) = &point.place else {
            return Ok(());
        };
        if self.via == Via::Trampoline {
            prog.set_attach_target(0, Some(function.clone()))?;
            if self.ret {
                prog.set_attach_type(ProgramAttachType::TraceFexit);
            }
        }
        Ok(())
    }

    fn attach(
        &self,
        skel: &ProctraceSkel<'_>,
        point: &Resolved,
        cookies: bool,
    ) -> libbpf_rs::Result<Link> {
        let Place::KernelFunction(function) = &point.place else {
            return Err(not_its_place());
        };
        let copy = self
            .copy(point, cookies)
            .map(|name| program_named(skel, &name));
        if self.via == Via::Trampoline {
            return copy.expect("an fentry copy per probe").attach_trace();
        }
        // A kernel without cookies refuses any but 0 (EOPNOTSUPP).
        let opts = KprobeOpts {
            cookie: if cookies {
                u64::from(point.point.id)
            } else {
                0
            },
            ..Default::default()
        };
        let program = copy.as_ref().unwrap_or(&skel.progs.probe_kprobe);
        program.attach_kprobe_with_opts(self.ret, function, opts)
    }
}

/// The kernel's functions `pattern` names in kallsyms (`ADDRESS TYPE
/// NAME [MODULE]`), each once, in order: text symbols, and for a pattern
/// not the compiler's copies (`name.isra.0`, `name.cold`), which are
/// probed through the function they were made of.
fn functions(kallsyms: &str, pattern: &str) -> Vec<String> {
    let exact = !is_pattern(pattern);
    let mut names: Vec<String> = kallsyms
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            let text = kind.eq_ignore_ascii_case("t");
            let matches = match exact {
                true => name == pattern,
                false => !name.contains('.') && glob_match(pattern, name),
            };
            (text && matches).then(|| name.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Why this kernel cannot attach `point` through a BPF trampoline, if it
/// cannot: said before anything loads, from what loading a program that
/// does nothing at the function's entry answers, and for the `first`
/// point of a kind attaching it (whether the kernel attaches trampolines
/// is the kernel's, not the function's, and each attachment builds one
/// and tears it down through an RCU grace period).
fn trampoline_refusal(point: &Resolved, first: bool) -> Option<String> {
    let Place::KernelFunction(function) = &point.place else {
        return None;
    };
    if point.point.id >= probe_limits::NO_COOKIE_PROBES.0 {
        return Some(format!(
            "fentry and fexit probes attach through a program each, of which proctrace has {}: \
             this is probe {} (kprobe:{function} has no such limit)",
            probe_limits::NO_COOKIE_PROBES.0,
            point.point.id + 1
        ));
    }
    if !point.reads.values.is_empty() && !has_func_args() {
        return Some(format!(
            "this kernel's BPF trampolines do not hand their programs a function's arguments and \
             return value (bpf_get_func_arg, Linux 5.17): kprobe:{function} and \
             kretprobe:{function} read them here"
        ));
    }
    let instead = format!("kprobe:{function} where it has kprobes, or tracepoint:CATEGORY:NAME");
    let tried = match first {
        true => attach_at_entry(function),
        false => load_at_entry(function),
    };
    let why = match tried {
        Ok(_) => return None,
        Err(Refused::NoBtf) => format!(
            "the kernel's BTF has no function {function} (inlined, or built without BTF for it)"
        ),
        Err(Refused::Load(err)) => {
            format!("this kernel does not load BPF trampoline programs ({err}): {instead}")
        }
        Err(Refused::Attach(err)) => {
            format!("this kernel cannot attach BPF trampolines ({err}): {instead}")
        }
    };
    Some(why)
}

/// Whether trampoline programs can read the function's arguments and
/// return value: bpf_get_func_arg and bpf_get_func_ret came in Linux 5.17
/// with bpf_loop, which can be probed for without a function to attach
/// a program to.
fn has_func_args() -> bool {
    ProgramType::RawTracepoint
        .is_helper_supported(BPF_FUNC_loop)
        .unwrap_or(false)
}

/// Why a program could not be loaded at a function's entry, or attached.
enum Refused {
    NoBtf,
    Load(Errno),
    Attach(Errno),
}

/// A kernel's error number, said as the kernel means it: 524 (ENOTSUPP,
/// which no libc names) is what an architecture without trampolines
/// answers (arm64 before 6.4).
struct Errno(i32);

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            524 => f.write_str("not supported"),
            n => std::io::Error::from_raw_os_error(n).fmt(f),
        }
    }
}

/// Loads `r0 = 0; exit` as an fentry program of `function` and attaches
/// it (closed at once: attaching is where an architecture without
/// trampolines says so).
fn attach_at_entry(function: &str) -> Result<OwnedFd, Refused> {
    let program = load_at_entry(function)?;
    // SAFETY: a loaded program's fd; no name for a tracing program.
    let link = unsafe { bpf_raw_tracepoint_open(std::ptr::null(), program.as_raw_fd()) };
    match link {
        // SAFETY: a new fd of ours.
        fd if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        err => Err(Refused::Attach(Errno(-err))),
    }
}

/// Loads `r0 = 0; exit` as an fentry program of `function`.
fn load_at_entry(function: &str) -> Result<OwnedFd, Refused> {
    let name = CString::new(function).map_err(|_| Refused::NoBtf)?;
    // SAFETY: a NUL-terminated name.
    let btf_id = unsafe { libbpf_find_vmlinux_btf_id(name.as_ptr(), BPF_TRACE_FENTRY) };
    if btf_id <= 0 {
        return Err(Refused::NoBtf);
    }
    // BPF_ALU64 | BPF_MOV | BPF_K into r0, then BPF_JMP | BPF_EXIT.
    let code: [u64; 2] = [0xb7, 0x95];
    let mut opts = bpf_prog_load_opts {
        sz: size_of::<bpf_prog_load_opts>() as _,
        expected_attach_type: BPF_TRACE_FENTRY,
        attach_btf_id: btf_id as u32,
        ..Default::default()
    };
    let license = c"GPL";
    // SAFETY: two instructions, each 8 bytes as `bpf_insn` lays them out
    // (the opcode in the first byte, registers and immediate zero).
    let fd = unsafe {
        bpf_prog_load(
            BPF_PROG_TYPE_TRACING,
            std::ptr::null(),
            license.as_ptr(),
            code.as_ptr().cast::<bpf_insn>(),
            code.len() as _,
            &mut opts,
        )
    };
    match fd {
        // SAFETY: a new fd of ours.
        fd if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        err => Err(Refused::Load(Errno(-err))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81234560 T vfs_read
ffffffff81234990 t vfs_readv.isra.0
ffffffff81234a00 T vfs_readv
ffffffff81300000 D vfs_read_data
ffffffffc0001000 t vfs_read_hook\t[somemod]
ffffffffc0002000 T vfs_read\t[othermod]
";

    #[test]
    fn kernel_functions_are_found_by_name_or_pattern() {
        assert_eq!(functions(KALLSYMS, "vfs_read"), ["vfs_read"]);
        assert_eq!(
            functions(KALLSYMS, "vfs_read*"),
            ["vfs_read", "vfs_read_hook", "vfs_readv"]
        );
        assert_eq!(
            functions(KALLSYMS, "vfs_readv.isra.0"),
            ["vfs_readv.isra.0"]
        );
        assert!(functions(KALLSYMS, "vfs_read_data").is_empty());
    }

    #[test]
    fn kernel_function_specs_say_what_is_wrong() {
        assert!(KPROBE.parse("").unwrap_err().contains("no FUNCTION"));
        assert!(KPROBE
            .parse("mod:f")
            .unwrap_err()
            .contains("kprobe:FUNCTION"));
        assert!(FEXIT.parse("f+4").unwrap_err().contains("no +OFFSET"));
        let (file, target) = KRETPROBE.parse("vfs_*").unwrap();
        assert_eq!(file, None);
        assert_eq!(target.to_string(), "vfs_*");
    }
}
