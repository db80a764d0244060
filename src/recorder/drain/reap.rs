//! Collecting exited children: the root's status, and as the subreaper
//! the tree's orphans, which would otherwise stay zombies; `--on-hang`
//! shells' statuses are handed over to their thread.

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid as NixPid;

use crate::event::{Pid, Trailer};
use crate::recorder::error::RecordError;
use crate::recorder::hooks::Reaped;

/// Collects what has exited; with `root_exited`, waits for the root's
/// status first. `subreaper`: every orphan of the tree is a child to
/// collect, not only the root. `hooks`: the `--on-hang` shells' slots.
pub(super) fn reap(
    root: Pid,
    root_exited: bool,
    subreaper: bool,
    totals: &mut Trailer,
    mut hooks: Option<&mut Reaped>,
) {
    let mut collect = |waited| collect(waited, root, totals, hooks.as_deref_mut());
    if root_exited {
        collect(waitpid(NixPid::from_raw(root), None));
    }
    let any = if subreaper { -1 } else { root };
    while collect(waitpid(NixPid::from_raw(any), Some(WaitPidFlag::WNOHANG))) {}
}

/// Takes in one wait result, handing an `--on-hang` shell's over; false
/// when there is nothing more to wait for.
fn collect(
    waited: nix::Result<WaitStatus>,
    root: Pid,
    totals: &mut Trailer,
    hooks: Option<&mut Reaped>,
) -> bool {
    if let (Ok(status), Some(hooks)) = (waited, hooks) {
        if let Some(slot) = status.pid().and_then(|pid| hooks.get_mut(&pid.as_raw())) {
            *slot = Some(status);
            return true;
        }
    }
    match waited {
        Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == root => {
            totals.root_exit_code = Some(code)
        }
        Ok(WaitStatus::Signaled(pid, signal, _)) if pid.as_raw() == root => {
            totals.root_signal = Some(signal as i32)
        }
        Ok(WaitStatus::StillAlive) | Err(_) => return false,
        Ok(_) => {}
    }
    true
}

/// Orphans of the tree become proctrace's children instead of init's, so
/// they can be waited for and killed cleanly.
pub(super) fn become_subreaper() -> Result<(), RecordError> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes a plain integer argument.
    let result = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if result == 0 {
        Ok(())
    } else {
        Err(RecordError::System {
            context: "becoming the subreaper of the tree".into(),
            source: std::io::Error::last_os_error(),
        })
    }
}
