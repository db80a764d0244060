//! The `--probe` points in the loaded object: each configured and attached
//! by its kind ([`crate::recorder::probes::kinds`]), for every process (the
//! program keeps the tree's hits only), and what this kernel can attach.
//! The cookie of each attachment is the probe's id; before Linux 5.15,
//! which has none, each probe is attached with a copy of its program that
//! knows its id.

use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{Link, MapCore, MapFlags, ProgramType};

use crate::bpf::types::probe_limits;
use crate::bpf::{OpenProctraceSkel, ProctraceSkel};
use crate::recorder::error::RecordError;
use crate::recorder::probes::kinds;
use crate::recorder::probes::Resolved;
use crate::recorder::wire::bytes_of;

/// Attaches every point, in order, each by its kind; the first that
/// fails ends it, unless it is optional.
pub(super) fn attach(
    skel: &ProctraceSkel<'_>,
    points: &[Resolved],
    cookies: bool,
) -> Result<Vec<Link>, RecordError> {
    let mut links = Vec::new();
    for point in points {
        // Set before the first hit, which may come as soon as it attaches.
        let attached = write_setting(skel, point)
            .and_then(|()| kinds::of(point.point.kind).attach(skel, point, cookies));
        match attached {
            Ok(link) => links.push(link),
            Err(source) => {
                let err = RecordError::ProbeAttach {
                    probe: point.point.spec.clone(),
                    at: point.point.label(),
                    source: Box::new(source),
                };
                match point.optional {
                    true => log::warn!("{err}: recording without it"),
                    false => return Err(err),
                }
            }
        }
    }
    Ok(links)
}

/// Tells the kernel what `point`'s hits read, keep and must pass.
fn write_setting(skel: &ProctraceSkel<'_>, point: &Resolved) -> libbpf_rs::Result<()> {
    let setting = bytes_of(&kinds::setting(point));
    let id = point.point.id.to_ne_bytes();
    skel.maps
        .probe_settings
        .update(&id, &setting, MapFlags::ANY)
}

/// Sets what the points need before the object loads, kind by kind: the
/// programs to load, and the copies of their programs (without cookies,
/// and for fentry and fexit always).
pub(super) fn configure(
    open: &mut OpenProctraceSkel<'_>,
    points: &[Resolved],
    cookies: bool,
) -> Result<(), RecordError> {
    for kind in kinds::KINDS {
        let of_kind: Vec<&Resolved> = points
            .iter()
            .filter(|p| p.point.kind == kind.kind())
            .collect();
        kind.configure(&mut open.progs, &of_kind, cookies);
    }
    let copies: Vec<(String, &Resolved)> = points
        .iter()
        .filter_map(|p| Some((kinds::of(p.point.kind).copy(p, cookies)?, p)))
        .collect();
    if copies.is_empty() {
        return Ok(());
    }
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if let Some((_, point)) = copies.iter().find(|(copy, _)| *copy == name) {
            prog.set_autoload(true);
            kinds::of(point.point.kind)
                .prepare_copy(&mut prog, point)
                .map_err(RecordError::bpf(format!(
                    "preparing {name} for {}",
                    point.point.spec
                )))?;
        }
    }
    Ok(())
}

/// Whether this kernel can attach `probes`: what each kind needs of it
/// ([`kinds::Kind::check`]), and before BPF cookies (5.15) a copy of the
/// uprobe program for each.
pub(super) fn check_kernel(probes: &[Resolved], cookies: bool) -> Result<(), RecordError> {
    for kind in kinds::KINDS {
        let of_kind: Vec<&Resolved> = probes
            .iter()
            .filter(|p| p.point.kind == kind.kind())
            .collect();
        if !of_kind.is_empty() {
            kind.check(&of_kind, cookies)?;
        }
    }
    let max = probe_limits::NO_COOKIE_PROBES.0 as usize;
    if !cookies && probes.len() > max {
        return Err(RecordError::TooManyProbesWithoutCookies {
            count: probes.len(),
            max,
        });
    }
    Ok(())
}

/// Whether this kernel gives programs their attachment's cookie (5.15),
/// which says which probe fired.
pub(crate) fn kernel_has_cookies() -> bool {
    ProgramType::Kprobe
        .is_helper_supported(libbpf_rs::libbpf_sys::BPF_FUNC_get_attach_cookie)
        .unwrap_or(false)
}
