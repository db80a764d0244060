//! proctrace's own failures and running under sudo.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

/// Runs proctrace with `args` (bounded), stdin closed, output captured;
/// under `prefix`, a command that changes the user, capabilities,
/// namespaces or cgroup it runs in, which needs root.
fn proctrace(prefix: &[&str], args: &[&str]) -> Output {
    if !prefix.is_empty() {
        require_root();
    }
    let (program, rest) = match prefix.split_first() {
        Some((p, rest)) => (p.to_string(), rest),
        None => (proctrace_bin().to_string(), &[][..]),
    };
    let mut command = Command::new(program);
    command.args(rest);
    if !prefix.is_empty() {
        command.arg(proctrace_bin());
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, "proctrace");
    Output {
        status,
        stdout: fs::read(out).unwrap(),
        stderr: fs::read(err).unwrap(),
    }
}

/// Exactly one line on stderr, `proctrace: ...`; returns it.
fn one_line_message(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr:?}");
    assert!(lines[0].starts_with("proctrace: "), "{stderr:?}");
    lines[0].to_string()
}

#[test]
fn missing_command_is_127() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let output = proctrace(
        &[],
        &[
            "record",
            "-o",
            out.to_str().unwrap(),
            "--",
            "no-such-command-xyz",
            "arg",
        ],
    );
    assert_eq!(output.status.code(), Some(127));
    let message = one_line_message(&output);
    assert!(message.contains("no-such-command-xyz"), "{message}");
    assert!(message.contains("command not found"), "{message}");
    assert!(
        !out.exists(),
        "a recording was left for a run that never started"
    );
}

#[test]
fn unwritable_output_is_2() {
    let output = proctrace(&[], &["record", "-o", "/nonexistent/dir/x", "--", "true"]);
    assert_eq!(output.status.code(), Some(2));
    let message = one_line_message(&output);
    assert!(message.contains("/nonexistent/dir/x"), "{message}");
}

#[test]
fn not_root_is_2_and_mentions_sudo() {
    // A dir nobody can write to; the binary is world-readable under /work.
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.path().join("rec.ndjson");
    let output = proctrace(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        &["record", "-o", out.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let message = one_line_message(&output);
    assert!(message.contains("sudo"), "{message}");
    assert!(
        !out.exists(),
        "a recording was left for a run that never started"
    );
}

/// Under (simulated) sudo, the command runs as the invoking user, unless
/// --keep-root; the recording itself is complete either way.
fn sudo(keep_root: bool) {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let ids = dir.path().join("ids");
    let script = format!("echo $(id -u) $(id -g) > {}", ids.display());
    let mut opts = Opts::new(Mode::Ring);
    opts.keep_root = keep_root;
    opts.env = [
        ("SUDO_UID", "65534"),
        ("SUDO_GID", "65534"),
        ("SUDO_USER", "nobody"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec();
    let run = record_in(dir, &opts, &["sh", "-c", &script]);
    let expected = if keep_root { "0 0" } else { "65534 65534" };
    assert_eq!(fs::read_to_string(&ids).unwrap().trim(), expected);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let root = run.root();
    assert_eq!(run.argvs(root), [strings(&["sh", "-c", &script])]);
    // Two command substitutions, each forking `id`.
    let kids = run.children(root);
    assert_eq!(kids.len(), 2, "{}", run.text);
    assert_eq!(run.argvs(kids[0]), [strings(&["id", "-u"])]);
    assert_eq!(run.argvs(kids[1]), [strings(&["id", "-g"])]);
    // The recording belongs to the user who asked for it.
    let owner = fs::metadata(run.dir.path().join("rec.ndjson"))
        .unwrap()
        .uid();
    assert_eq!(owner, 65534);
}

#[test]
fn sudo_runs_command_as_invoking_user() {
    sudo(false);
}

#[test]
fn sudo_keep_root_runs_command_as_root() {
    sudo(true);
}

/// A run refused before its command starts: status 2, one line, which is
/// returned; the command did not run and no recording is left at `out`.
/// Only root gets past the check of its capabilities to these refusals.
fn refused(prefix: &[&str], flags: &[&str], out: &Path) -> String {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("echo > {}", marker.display());
    let mut args = vec!["record", "-o", out.to_str().unwrap()];
    args.extend(flags);
    args.extend(["--", "sh", "-c", &script]);
    let output = proctrace(prefix, &args);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(!marker.exists(), "the command ran");
    assert!(!out.exists(), "a recording was left behind");
    one_line_message(&output)
}

#[test]
fn read_only_output_dir_is_refused_before_the_command_runs() {
    let tmpfs = Tmpfs::mount("size=64k", true);
    let out = tmpfs.path().join("rec.ndjson");
    let message = refused(&[], &[], &out);
    assert!(message.contains(out.to_str().unwrap()), "{message}");
    assert!(message.contains("Read-only file system"), "{message}");
}

#[test]
fn root_without_bpf_capabilities_is_told_which() {
    let dir = tempfile::tempdir().unwrap();
    let setpriv = [
        "setpriv",
        "--inh-caps=-all",
        "--bounding-set=-bpf,-perfmon,-sys_admin",
    ];
    let message = refused(&setpriv, &[], &dir.path().join("rec.ndjson"));
    for cap in ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"] {
        assert!(message.contains(cap), "{message}");
    }
}

#[test]
fn kernel_without_btf_asks_for_a_btf_file() {
    let dir = tempfile::tempdir().unwrap();
    // An empty /sys/kernel/btf, in a mount namespace of proctrace's own.
    let no_btf = [
        "unshare",
        "--mount",
        "sh",
        "-c",
        r#"mount -t tmpfs none /sys/kernel/btf && exec "$@""#,
        "sh",
    ];
    let message = refused(&no_btf, &[], &dir.path().join("rec.ndjson"));
    assert!(message.contains("/sys/kernel/btf/vmlinux"), "{message}");
    assert!(message.contains("--btf FILE"), "{message}");
}

#[test]
fn missing_btf_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let btf = dir.path().join("no-such-btf");
    let flags = ["--btf", btf.to_str().unwrap()];
    let message = refused(&[], &flags, &dir.path().join("rec.ndjson"));
    assert!(message.contains(btf.to_str().unwrap()), "{message}");
    assert!(message.contains("No such file"), "{message}");
}

#[test]
fn btf_file_that_is_not_btf_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let btf = dir.path().join("vmlinux.txt");
    fs::write(&btf, "not BTF\n").unwrap();
    let flags = ["--btf", btf.to_str().unwrap()];
    let message = refused(&[], &flags, &dir.path().join("rec.ndjson"));
    assert!(message.contains(btf.to_str().unwrap()), "{message}");
    assert!(message.contains("not BTF"), "{message}");
}

/// A memory cgroup of a test's own, limited to `limit` bytes: a child of
/// the test's cgroup under cgroup v1's memory hierarchy, else of the
/// unified root. Removed when dropped (once nothing runs in it). Making
/// one needs root.
struct MemoryCgroup(std::path::PathBuf);

impl MemoryCgroup {
    fn new(limit: u64) -> Option<MemoryCgroup> {
        require_root();
        let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
        let v1 = cgroups.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':').skip(1);
            let memory = fields.next()?.split(',').any(|c| c == "memory");
            memory.then(|| fields.next()).flatten()
        });
        let name = format!("proctrace-test-{}", std::process::id());
        let (dir, max) = match v1 {
            Some(path) => (
                Path::new("/sys/fs/cgroup/memory")
                    .join(path.trim_start_matches('/'))
                    .join(name),
                "memory.limit_in_bytes",
            ),
            None => {
                let root = Path::new("/sys/fs/cgroup");
                let controllers = fs::read_to_string(root.join("cgroup.controllers")).ok()?;
                controllers.split_whitespace().find(|c| *c == "memory")?;
                fs::write(root.join("cgroup.subtree_control"), "+memory").ok()?;
                (root.join(name), "memory.max")
            }
        };
        fs::create_dir(&dir).ok()?;
        let cgroup = MemoryCgroup(dir);
        fs::write(cgroup.0.join(max), limit.to_string()).ok()?;
        Some(cgroup)
    }

    /// A prefix that runs the command in this cgroup.
    fn prefix(&self) -> String {
        format!("echo $$ > {}/cgroup.procs && exec \"$@\"", self.0.display())
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

#[test]
fn ring_over_the_memory_cgroup_limit_is_refused_with_the_size() {
    let cgroup = MemoryCgroup::new(128 << 20);
    if !prerequisite(cgroup.is_some(), "a memory cgroup controller") {
        return;
    }
    let cgroup = cgroup.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = cgroup.prefix();
    let prefix = ["sh", "-c", &script, "sh"];
    let flags = ["--buffer-mib", "512"];
    let message = refused(&prefix, &flags, &dir.path().join("rec.ndjson"));
    assert_eq!(
        message,
        "proctrace: the kernel refused 512 MiB of memory for the ring buffer (BPF map \
         \"events\"): over the limit of its memory cgroup (128 MiB): record with a smaller \
         --buffer-mib, or raise the cgroup's memory limit"
    );
}

#[test]
fn ring_size_not_a_power_of_two_is_refused_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let output = proctrace(
        &[],
        &[
            "record",
            "-o",
            out.to_str().unwrap(),
            "--buffer-mib",
            "3",
            "--",
            "true",
        ],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.lines().next(),
        Some(
            "error: invalid value '3' for '--buffer-mib <MIB>': not a power of two from 1 to 2048"
        )
    );
    assert!(!out.exists(), "a recording was left behind");
}

/// A run that fails before its command starts (a bad probe, a command not
/// found, a missing BTF file) keeps the recording and the command's log it
/// would have replaced byte for byte, and leaves nothing else behind.
#[test]
fn a_failed_start_keeps_the_files_it_would_replace() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("keep.ndjson");
    let log = dir.path().join("keep.log");
    let (out_arg, log_arg) = (out.to_str().unwrap(), log.to_str().unwrap());
    let cases: [(&[&str], i32); 3] = [
        (&["--probe", "uprobe:libc:nosuchfunc", "--", "true"], 2),
        (&["--btf", "/nonexistent/btf", "--", "true"], 2),
        (&["--", "no-such-command-xyz"], 127),
    ];
    for (flags, status) in cases {
        fs::write(&out, b"{\"an old\":\"recording\"}\n").unwrap();
        fs::write(&log, b"an old log\n").unwrap();
        let mut args = vec!["record", "-o", out_arg, "--command-output", log_arg];
        args.extend(flags);
        let output = proctrace(&[], &args);
        assert_eq!(output.status.code(), Some(status), "{flags:?}: {output:?}");
        one_line_message(&output);
        assert_eq!(
            fs::read(&out).unwrap(),
            b"{\"an old\":\"recording\"}\n",
            "{flags:?}"
        );
        assert_eq!(fs::read(&log).unwrap(), b"an old log\n", "{flags:?}");
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["keep.log", "keep.ndjson"], "{flags:?}");
    }
}

/// Neither a recording nor a log is left behind where none was.
#[test]
fn a_failed_start_creates_no_file() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = (dir.path().join("rec.ndjson"), dir.path().join("rec.log"));
    let args = [
        "record",
        "-o",
        out.to_str().unwrap(),
        "--command-output",
        log.to_str().unwrap(),
        "--btf",
        "/nonexistent/btf",
        "--",
        "true",
    ];
    let output = proctrace(&[], &args);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A tracked map of no entries is the kernel's bare EINVAL at load: the
/// limit is named before anything loads.
#[test]
fn no_room_for_processes_is_refused_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.ndjson");
    let said = refused(&[], &["--max-processes", "0"], &out);
    assert_eq!(
        said,
        "proctrace: --max-processes 0: the tree's root needs room, so at least 1"
    );
}
