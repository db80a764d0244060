//! Attaching the `--probe` points: uprobes by file offset, USDT probes by
//! provider and name (libbpf reads the notes, sets the semaphores and
//! works out where each argument is), all for every process: the program
//! keeps the tree's hits only. The cookie of each attachment is the
//! probe's id; before Linux 5.15, which has none, each uprobe is attached
//! with a copy of the program that knows its id.

use std::io::Read;
use std::path::Path;

use libbpf_rs::skel::Skel;
use libbpf_rs::{Link, MapCore, MapFlags, ProgramMut, ProgramType, UprobeOpts, UsdtOpts};

use crate::bpf::types::probe_limits;
use crate::bpf::ProctraceSkel;
use crate::event::ProbeKind;
use crate::recorder::error::RecordError;
use crate::recorder::probes::runner::{TestMarks, TEST_VARIABLES};
use crate::recorder::probes::{Place, Resolved};

/// Every process, not one: the tree's are picked in the kernel.
const ALL_PROCESSES: i32 = -1;

/// Attaches every point, in order; the first that fails ends it, unless
/// it is optional. The
/// USDT probes' string arguments are set first: the first hit may come at
/// once.
pub(super) fn attach(
    skel: &ProctraceSkel<'_>,
    points: &[Resolved],
    cookies: bool,
) -> Result<Vec<Link>, RecordError> {
    for point in points {
        if let Place::Usdt { strings, .. } = point.place {
            skel.maps
                .probe_strings
                .update(
                    &point.point.id.to_ne_bytes(),
                    &strings.to_ne_bytes(),
                    MapFlags::ANY,
                )
                .map_err(RecordError::bpf("setting the probes' string arguments"))?;
        }
    }
    let mut links = Vec::new();
    for point in points {
        match attach_one(skel, point, cookies) {
            Ok(link) => links.push(link),
            Err(err) if point.optional => log::warn!("{err}: recording without it"),
            Err(err) => return Err(err),
        }
    }
    Ok(links)
}

fn attach_one(
    skel: &ProctraceSkel<'_>,
    resolved: &Resolved,
    cookies: bool,
) -> Result<Link, RecordError> {
    let cookie = u64::from(resolved.point.id);
    let attached = match &resolved.place {
        Place::Offset(offset) => {
            // A kernel without cookies refuses any but 0 (EOPNOTSUPP).
            let opts = UprobeOpts {
                cookie: if cookies { cookie } else { 0 },
                retprobe: resolved.point.kind == ProbeKind::Uretprobe,
                ..Default::default()
            };
            let copy;
            let program = if cookies {
                &skel.progs.probe_uprobe
            } else {
                copy = uprobe_copy(skel, resolved.point.id);
                &copy
            };
            program.attach_uprobe_with_opts(ALL_PROCESSES, &resolved.file, *offset as usize, opts)
        }
        Place::Usdt { provider, name, .. } => skel.progs.probe_usdt.attach_usdt_with_opts(
            ALL_PROCESSES,
            &resolved.file,
            provider,
            name,
            UsdtOpts {
                cookie,
                ..Default::default()
            },
        ),
    };
    attached.map_err(|source| RecordError::ProbeAttach {
        probe: resolved.point.spec.clone(),
        at: resolved.point.label(),
        source: Box::new(source),
    })
}

/// Attaches the uprobes on libc's `setenv` and `unsetenv` that tell the
/// tests inside a process, once the variables they look for are set.
/// They are never needed to record: where they cannot attach, the
/// recording goes on without them (and a test's probe hits and samples
/// fall to its process's test).
pub(super) fn attach_marks(skel: &ProctraceSkel<'_>, marks: &TestMarks) -> Vec<Link> {
    let variables = &skel.maps.test_variables;
    for name in TEST_VARIABLES {
        // NUL-padded to the key's size, TEST_VARIABLE_CAP (proctrace.h).
        let mut key = vec![0u8; variables.key_size() as usize];
        key[..name.len()].copy_from_slice(name.as_bytes());
        if let Err(err) = variables.update(&key, &[1], MapFlags::ANY) {
            log::warn!("naming the tests inside a process: {err}");
            return Vec::new();
        }
    }
    let progs = &skel.progs;
    let attached = [
        (&progs.mark_setenv, marks.setenv),
        (&progs.mark_unsetenv, marks.unsetenv),
    ]
    .into_iter()
    .map(|(prog, offset)| {
        prog.attach_uprobe_with_opts(
            ALL_PROCESSES,
            &marks.file,
            offset as usize,
            UprobeOpts::default(),
        )
    })
    .collect::<Result<Vec<Link>, _>>();
    attached.unwrap_or_else(|err| {
        log::warn!(
            "naming the tests inside a process ({}): {err}",
            marks.file.display()
        );
        Vec::new()
    })
}

/// The copy of the uprobe program that knows probe `id`, for a kernel
/// without cookies (probes.bpf.h's UPROBE_COPY); `check_kernel` let no
/// id past them through.
fn uprobe_copy<'obj>(skel: &'obj ProctraceSkel<'_>, id: u32) -> ProgramMut<'obj> {
    let name = uprobe_copy_name(id);
    let copy = skel
        .object()
        .progs_mut()
        .find(|p| p.name() == name.as_str());
    copy.expect("a copy of the uprobe program per probe (probes.bpf.h)")
}

/// The name of the copy of the uprobe program for probe `id`.
pub(super) fn uprobe_copy_name(id: u32) -> String {
    format!("probe_uprobe_{id}")
}

/// Whether this kernel can attach `probes`: it has uprobes, and before
/// BPF cookies (5.15) there is a copy of the uprobe program for each, and
/// every USDT probe is at one address in every process (libbpf tells them
/// apart by address there).
pub(super) fn check_kernel(probes: &[Resolved], cookies: bool) -> Result<(), RecordError> {
    if !Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        return Err(RecordError::NoUprobes);
    }
    if cookies {
        return Ok(());
    }
    let max = probe_limits::NO_COOKIE_PROBES.0 as usize;
    if probes.len() > max {
        return Err(RecordError::TooManyProbesWithoutCookies {
            count: probes.len(),
            max,
        });
    }
    let usdt = probes
        .iter()
        .filter(|p| matches!(p.place, Place::Usdt { .. }));
    match usdt.into_iter().find(|p| !fixed_addresses(&p.file)) {
        Some(p) => Err(RecordError::UsdtNeedsCookies {
            probe: p.point.spec.clone(),
            file: p.file.clone(),
        }),
        None => Ok(()),
    }
}

/// Whether `file` is an ELF executable loaded at the addresses it was
/// linked for (`ET_EXEC`), not a shared library or PIE (`ET_DYN`).
fn fixed_addresses(file: &Path) -> bool {
    const ET_EXEC: u16 = 2;
    let mut head = [0u8; 18];
    let read = std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut head));
    // e_ident[EI_DATA] (1: little-endian), then e_type at offset 16.
    let e_type = match head[5] {
        1 => u16::from_le_bytes([head[16], head[17]]),
        _ => u16::from_be_bytes([head[16], head[17]]),
    };
    read.is_ok() && e_type == ET_EXEC
}

/// Whether this kernel gives programs their attachment's cookie (5.15),
/// which says which probe fired.
pub(crate) fn kernel_has_cookies() -> bool {
    ProgramType::Kprobe
        .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_get_attach_cookie)
        .unwrap_or(false)
}
