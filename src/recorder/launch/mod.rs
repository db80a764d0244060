//! Starting the command so that its first exec is already traced: fork,
//! stop the child under ptrace before it execs, let the caller seed the BPF
//! map with its pid, then let it go; or following processes that already
//! run ([`running`]).

pub(super) mod running;

use std::env;
use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{self, ForkResult, Gid, Pid as NixPid, Uid};

use crate::event::{Attached, Pid};
use crate::recorder::error::RecordError;
use crate::recording::Reserved;

/// What a recording follows.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A command to start: program and arguments.
    Command(Vec<OsString>),
    /// Processes that already run.
    Pids(Vec<Pid>),
}

impl Target {
    /// The command to start, as text; `None` when attaching.
    pub(crate) fn command(&self) -> Option<Vec<String>> {
        match self {
            Target::Command(argv) => Some(
                argv.iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
            ),
            Target::Pids(_) => None,
        }
    }

    /// Checks the target and makes it ready to start: the command found
    /// and what its child needs prepared (unless `keep_root`, to run as
    /// sudo's user; with its stdio sent to `output`), or every pid alive.
    /// Also the command line the recording is named after.
    /// With `node_perf_maps`, the command's Node processes write perf
    /// maps of their JavaScript functions ([`node_perf_maps`]).
    pub(crate) fn prepare(
        &self,
        keep_root: bool,
        output: Option<&Path>,
        node_perf_maps: bool,
    ) -> Result<(Prepared, Vec<String>), RecordError> {
        match self {
            Target::Command(argv) => {
                let mut launch = Launch::new(argv, keep_root, output)?;
                if node_perf_maps {
                    launch.env = Some(node_perf_maps_env(std::env::vars_os()));
                    launch.node_perf_maps_ours = !std::env::var_os("NODE_OPTIONS")
                        .is_some_and(|o| o.to_string_lossy().contains("--perf-basic-prof"));
                }
                Ok((Prepared::Launch(launch), self.command().unwrap_or_default()))
            }
            Target::Pids(pids) if pids.is_empty() => Err(RecordError::NoCommand),
            Target::Pids(pids) => {
                let attach = running::Attach::new(pids)?;
                let command = attach.command();
                Ok((Prepared::Attach(attach), command))
            }
        }
    }
}

/// A target checked and ready to start on the recording's thread.
pub(crate) enum Prepared {
    Launch(Launch),
    Attach(running::Attach),
}

impl Prepared {
    /// Starts following the target at time `at`, `seed` putting each
    /// first process into the kernel's tracked map (`false` where the
    /// kernel had put it there at its fork), and `untrack` taking out a
    /// process attached to that turned out gone; returns the root pid and
    /// the processes attached to, which were running already.
    pub(crate) fn start(
        &self,
        at: u64,
        seed: impl Fn(Pid) -> Result<bool, RecordError>,
        untrack: impl Fn(Pid),
    ) -> Result<(Pid, Vec<Attached>), RecordError> {
        match self {
            Prepared::Launch(launch) => Ok((launch.start(seed)?, Vec::new())),
            Prepared::Attach(attach) => {
                let attached = attach.start(at, seed, untrack)?;
                Ok((attach.root(), attached))
            }
        }
    }

    /// The programs the command's first execs run (see
    /// [`first_programs`]); none when attaching.
    pub(crate) fn first_programs(&self) -> Vec<PathBuf> {
        match self {
            Prepared::Launch(launch) => {
                first_programs(OsStr::from_bytes(launch.argv[0].as_bytes()))
            }
            Prepared::Attach(_) => Vec::new(),
        }
    }

    /// Whether the perf maps of the command's Node processes are there
    /// only because proctrace asked for them.
    pub(crate) fn node_perf_maps_ours(&self) -> bool {
        matches!(self, Prepared::Launch(launch) if launch.node_perf_maps_ours)
    }

    /// Whether the root is proctrace's child, whose status it collects.
    pub(crate) fn is_child(&self) -> bool {
        matches!(self, Prepared::Launch(_))
    }
}

/// The user a command runs as when proctrace itself runs through sudo.
#[derive(Debug, Clone)]
struct Credentials {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
}

/// A command ready to start: everything the child needs is prepared before
/// the fork, since between fork and exec only async-signal-safe calls are
/// allowed in a multithreaded process.
pub struct Launch {
    argv: Vec<CString>,
    display: String,
    credentials: Option<Credentials>,
    /// Where the command's stdout and stderr go instead, with stdin from
    /// /dev/null; opened before the fork.
    redirect: Option<Redirect>,
    /// The command's environment, where it is not proctrace's.
    env: Option<Vec<CString>>,
    /// Whether the perf maps the command's Node processes write are
    /// there because the environment asked for them, not the user.
    node_perf_maps_ours: bool,
}

/// The files a redirected command gets as its stdio.
struct Redirect {
    output: Reserved,
    null: std::fs::File,
}

impl Launch {
    /// Prepares `argv`; unless `keep_root`, a command started through sudo
    /// runs as the invoking user.
    pub fn new(
        argv: &[OsString],
        keep_root: bool,
        output: Option<&Path>,
    ) -> Result<Self, RecordError> {
        let program = argv.first().ok_or(RecordError::NoCommand)?;
        let display = program.to_string_lossy().into_owned();
        if find_program(program).is_none() {
            return Err(RecordError::CommandNotFound(display));
        }
        let argv = argv
            .iter()
            .map(|arg| CString::new(arg.clone().into_vec()))
            .collect::<Result<_, _>>()
            .map_err(RecordError::system("an argument contains a NUL byte"))?;
        let credentials = if keep_root { None } else { sudo_credentials()? };
        let redirect = output
            .map(|path| Redirect::open(path, credentials.as_ref()))
            .transpose()?;
        Ok(Launch {
            argv,
            display,
            credentials,
            redirect,
            env: None,
            node_perf_maps_ours: false,
        })
    }

    /// Forks the child, calls `seed` with its pid while it is stopped
    /// before exec, then lets it exec. Returns once the exec has happened.
    pub fn start(
        &self,
        seed: impl FnOnce(Pid) -> Result<bool, RecordError>,
    ) -> Result<Pid, RecordError> {
        if let Some(redirect) = &self.redirect {
            // Emptied now that nothing but the fork stands before the
            // command: a failure before it leaves the old log whole.
            redirect
                .output
                .empty()
                .map_err(RecordError::system("emptying the command's output file"))?;
        }
        let (read_end, write_end) = unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(RecordError::system("creating a pipe"))?;
        // SAFETY: the child only makes async-signal-safe calls, then execs
        // or exits.
        let child = match unsafe { unistd::fork() }.map_err(RecordError::system("fork"))? {
            ForkResult::Child => {
                drop(read_end);
                self.exec_child(write_end)
            }
            ForkResult::Parent { child } => child,
        };
        drop(write_end);
        match waitpid(child, None)
            .map_err(RecordError::system("waiting for the command to stop"))?
        {
            WaitStatus::Stopped(_, Signal::SIGSTOP) => {}
            other => {
                return Err(RecordError::System {
                    context: format!("starting {}", self.display),
                    source: std::io::Error::other(format!(
                        "unexpected state before exec: {other:?}"
                    )),
                })
            }
        }
        let seeded = seed(child.as_raw());
        if seeded.is_err() {
            let _ = signal::kill(child, Signal::SIGKILL);
        }
        ptrace::detach(child, None).map_err(RecordError::system("releasing the command"))?;
        if let Err(err) = seeded {
            let _ = waitpid(child, None);
            return Err(err);
        }
        self.wait_for_exec(child, read_end)
    }

    /// The child's error pipe closes on a successful exec; otherwise it
    /// carries the errno of the failed exec.
    fn wait_for_exec(
        &self,
        child: NixPid,
        read_end: std::os::fd::OwnedFd,
    ) -> Result<Pid, RecordError> {
        let mut errno = [0u8; 4];
        let mut pipe = std::fs::File::from(read_end);
        match pipe.read(&mut errno) {
            Ok(4) => {
                let _ = waitpid(child, None);
                Err(RecordError::Exec {
                    command: self.display.clone(),
                    source: std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
                })
            }
            _ => Ok(child.as_raw()),
        }
    }

    fn exec_child(&self, error_pipe: std::os::fd::OwnedFd) -> ! {
        let result = (|| -> nix::Result<()> {
            ptrace::traceme()?;
            signal::raise(Signal::SIGSTOP)?;
            // Rust ignores SIGPIPE in its own processes; the command must
            // get the default, as it would from a shell.
            // SAFETY: resetting a disposition to the default is always sound.
            unsafe { signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) }?;
            crate::recorder::huge_pages::give_back();
            if let Some(redirect) = &self.redirect {
                redirect.install()?;
            }
            if let Some(creds) = &self.credentials {
                unistd::setgroups(&creds.groups)?;
                unistd::setgid(creds.gid)?;
                unistd::setuid(creds.uid)?;
            }
            match &self.env {
                Some(env) => unistd::execvpe(&self.argv[0], &self.argv, env)?,
                None => unistd::execvp(&self.argv[0], &self.argv)?,
            };
            Ok(())
        })();
        let errno = result.err().unwrap_or(Errno::UnknownErrno) as i32;
        let _ = unistd::write(&error_pipe, &errno.to_ne_bytes());
        let status = if errno == Errno::ENOENT as i32 {
            127
        } else {
            126
        };
        // SAFETY: _exit is async-signal-safe and skips the parent's atexit
        // handlers and buffers, which belong to the parent.
        unsafe { libc::_exit(status) }
    }
}

impl Redirect {
    /// Opens `path` without emptying it: a run that fails before the
    /// command starts keeps the log it would have replaced. Under sudo a
    /// log it creates belongs to the user, like the recording.
    fn open(path: &std::path::Path, owner: Option<&Credentials>) -> Result<Self, RecordError> {
        let owner = owner.map(|creds| (creds.uid.as_raw(), creds.gid.as_raw()));
        let output = Reserved::open(path, owner).map_err(|source| RecordError::System {
            context: format!("creating {}", path.display()),
            source,
        })?;
        let null = std::fs::File::open("/dev/null").map_err(|source| RecordError::System {
            context: "opening /dev/null".into(),
            source,
        })?;
        Ok(Redirect { output, null })
    }

    /// In the child: dup2 only, which is async-signal-safe.
    fn install(&self) -> nix::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto the standard descriptors of the child alone.
        let dup = |from: &std::fs::File, to| unsafe {
            Errno::result(libc::dup2(from.as_raw_fd(), to)).map(drop)
        };
        dup(&self.null, 0)?;
        dup(self.output.file(), 1)?;
        dup(self.output.file(), 2)
    }
}

/// Node's flag for a perf map of its compiled JavaScript functions, one
/// `write(2)` a line, complete even when the process is killed. Plain
/// `--perf-basic-prof` also writes an `isolate-*-v8.log` into the
/// process's working directory, which a test suite's tree must not find.
const NODE_PERF_MAP: &str = "--perf-basic-prof-only-functions";

/// `vars` (proctrace's environment) with [`NODE_PERF_MAP`] after what
/// `NODE_OPTIONS` holds already: Node refuses flags it does not allow
/// there (exit 9), and this one it allows.
fn node_perf_maps_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<CString> {
    let mut env = Vec::new();
    let mut seen = false;
    for (name, value) in vars {
        let mut entry = name.clone().into_vec();
        entry.push(b'=');
        entry.extend(value.as_bytes());
        if name == "NODE_OPTIONS" {
            seen = true;
            if !value.to_string_lossy().contains("--perf-basic-prof") {
                entry.extend(format!(" {NODE_PERF_MAP}").bytes());
            }
        }
        // An environment's strings hold no NUL.
        env.extend(CString::new(entry).ok());
    }
    if !seen {
        env.extend(CString::new(format!("NODE_OPTIONS={NODE_PERF_MAP}")).ok());
    }
    env
}

/// The file `program` names, found as execvp finds it: through PATH
/// unless it holds a slash.
fn find_program(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program)).filter(|path| path.exists());
    }
    let path = env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|file| file.is_file())
}

/// The programs the command's first execs run, their links followed: the
/// command's file and, for a script, its `#!` interpreter (through `env`,
/// the program env looks up).
fn first_programs(program: &OsStr) -> Vec<PathBuf> {
    let Some(file) = find_program(program) else {
        return Vec::new();
    };
    let mut head = [0u8; 256];
    let read = std::fs::File::open(&file)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let interpreter = interpreter_of(&head[..read]).and_then(|(interpreter, argument)| {
        let is_env = interpreter.file_name().is_some_and(|name| name == "env");
        match (is_env, argument) {
            (true, Some(program)) => find_program(&program),
            _ => Some(interpreter),
        }
    });
    [Some(file), interpreter]
        .into_iter()
        .flatten()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect()
}

/// The interpreter of a script whose file starts with `head`, and its
/// first argument (that is no option): `#!/usr/bin/env -S python3 -u`
/// gives `/usr/bin/env` and `python3`.
fn interpreter_of(head: &[u8]) -> Option<(PathBuf, Option<OsString>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let mut words = line
        .split(u8::is_ascii_whitespace)
        .filter(|word| !word.is_empty());
    let interpreter = PathBuf::from(OsStr::from_bytes(words.next()?));
    let argument = words
        .find(|word| !word.starts_with(b"-"))
        .map(|word| OsStr::from_bytes(word).to_owned());
    Some((interpreter, argument))
}

/// The invoking user's ids when proctrace runs through sudo.
fn sudo_credentials() -> Result<Option<Credentials>, RecordError> {
    let id = |name: &str| env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
    let (Some(uid), Some(gid)) = (id("SUDO_UID"), id("SUDO_GID")) else {
        return Ok(None);
    };
    if uid == 0 || !Uid::effective().is_root() {
        return Ok(None);
    }
    let gid = Gid::from_raw(gid);
    let groups = match env::var("SUDO_USER")
        .ok()
        .and_then(|user| CString::new(user).ok())
    {
        Some(user) => unistd::getgrouplist(&user, gid)
            .map_err(RecordError::system("looking up the sudo user's groups"))?,
        None => vec![gid],
    };
    Ok(Some(Credentials {
        uid: Uid::from_raw(uid),
        gid,
        groups,
    }))
}

/// The invoking user's ids when running through sudo, for files proctrace
/// creates on their behalf.
pub fn sudo_owner() -> Option<(Uid, Gid)> {
    sudo_credentials().ok().flatten().map(|c| (c.uid, c.gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scripts_interpreter_is_its_first_line_or_what_env_runs() {
        let of = |head: &str| interpreter_of(head.as_bytes());
        let pair = |interpreter: &str, argument: Option<&str>| {
            Some((PathBuf::from(interpreter), argument.map(OsString::from)))
        };
        assert_eq!(
            of("#!/usr/bin/python3\nimport sys"),
            pair("/usr/bin/python3", None)
        );
        assert_eq!(
            of("#! /usr/bin/env -S python3 -u\n"),
            pair("/usr/bin/env", Some("python3"))
        );
        assert_eq!(of("#!/bin/sh -e\n"), pair("/bin/sh", None));
        assert_eq!(of("\x7fELF"), None);
        assert_eq!(of("#!\n"), None);
    }

    #[test]
    fn the_first_programs_of_a_script_are_it_and_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run");
        std::fs::write(&script, "#!/usr/bin/env sh\necho\n").unwrap();
        let programs = first_programs(script.as_os_str());
        let sh = std::fs::canonicalize(find_program("sh".as_ref()).unwrap()).unwrap();
        assert_eq!(programs, [std::fs::canonicalize(&script).unwrap(), sh]);
        assert!(first_programs("no-such-program-here".as_ref()).is_empty());
    }

    fn env(vars: &[(&str, &str)]) -> Vec<String> {
        let vars = vars.iter().map(|(n, v)| (n.into(), v.into()));
        let env = node_perf_maps_env(vars.collect::<Vec<_>>().into_iter());
        env.into_iter().map(|e| e.into_string().unwrap()).collect()
    }

    #[test]
    fn node_options_gets_the_perf_map_flag_after_its_own() {
        assert_eq!(
            env(&[("PATH", "/bin")]),
            ["PATH=/bin", "NODE_OPTIONS=--perf-basic-prof-only-functions"]
        );
        assert_eq!(
            env(&[("NODE_OPTIONS", "--max-old-space-size=512"), ("A", "b=c")]),
            [
                "NODE_OPTIONS=--max-old-space-size=512 --perf-basic-prof-only-functions",
                "A=b=c"
            ]
        );
        // The user's own perf map flag stands alone.
        assert_eq!(
            env(&[("NODE_OPTIONS", "--perf-basic-prof")]),
            ["NODE_OPTIONS=--perf-basic-prof"]
        );
    }
}
