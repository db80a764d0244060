//! What a process ran, as a name that is the same from run to run: the
//! key that groups processes in `profile` and aligns two runs in `diff`.

use super::{ExecView, Processes};

/// Arguments kept in a command's group name; the rest become `…`.
const ARGS_KEPT: usize = 6;

impl Processes {
    /// The group the process at `index` belongs to: its program, then its
    /// arguments with what differs from run to run folded: numbers become
    /// `N`, file names `*.ext` (or `*` without an extension when they are
    /// paths), option values likewise, and repeats of the same folded
    /// argument are kept once. `<fork>` and the group of what it
    /// inherited for a process that never exec'd, as
    /// [`name`](Processes::name) says.
    pub fn command_group(&self, index: usize) -> String {
        let process = self.get(index);
        match process.execs.last() {
            Some(exec) => command_group_of(&exec),
            None => forked_group(self.exec_at(index, process.start())),
        }
    }
}

/// The group of a process that never exec'd and ran `inherited`.
pub(crate) fn forked_group(inherited: Option<ExecView<'_>>) -> String {
    match inherited {
        Some(exec) => format!("<fork> {}", command_group_of(&exec)),
        None => "<fork>".into(),
    }
}

/// The command group of one exec: see [`Processes::command_group`].
pub fn command_group_of(exec: &ExecView<'_>) -> String {
    let program = exec.program();
    let mut words: Vec<String> = vec![program.to_string()];
    // `sh ./run.sh x` is `run.sh x`: the script is the program.
    let base = |word: &str| word.rsplit('/').next().unwrap_or(word).to_owned();
    let interpreted = match (exec.argv.get(0), exec.argv.get(1)) {
        (Some(interpreter), Some(script)) => {
            base(interpreter) != program && base(script) == program
        }
        _ => false,
    };
    let args = exec.argv.iter().skip(1 + usize::from(interpreted));
    for arg in args.map(fold_argument) {
        if words.last() != Some(&arg) {
            words.push(arg);
        }
        if words.len() > ARGS_KEPT {
            words.push("…".into());
            break;
        }
    }
    words.join(" ")
}

/// An argument folded; a script (`sh -c 'cc -c src/f17.c'`) word by word,
/// so that the same command on other files folds alike.
fn fold_argument(arg: &str) -> String {
    if arg.contains(char::is_whitespace) {
        let words: Vec<String> = arg.split_whitespace().map(fold_word).collect();
        return words.join(" ");
    }
    fold_word(arg)
}

fn fold_word(arg: &str) -> String {
    if arg.starts_with('-') {
        // An option's value folds like an argument: `-o=/tmp/cc1.res` is
        // `-o=*.res`, in every run.
        return match arg.rsplit_once('=') {
            Some((option, value)) if !value.is_empty() && !value.starts_with('-') => {
                format!("{option}={}", fold_word(value))
            }
            _ => arg.to_string(),
        };
    }
    let name = arg.rsplit('/').next().unwrap_or(arg);
    let numeric = name.chars().all(|c| c.is_ascii_digit() || c == '.')
        && name.chars().any(|c| c.is_ascii_digit());
    match name.rsplit_once('.') {
        _ if numeric => "N".into(),
        Some((stem, ext))
            if !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(char::is_alphanumeric) =>
        {
            format!("*.{ext}")
        }
        _ if arg.contains('/') => "*".into(),
        // mktemp's and Python's temporary names: random letters may hold
        // no digit.
        _ if arg.len() > 3 && arg.starts_with("tmp") => "tmp*".into(),
        _ => fold_volatile(arg),
    }
}

/// `text` with what changes from run to run folded: each run of digits
/// as `N` (`[31493]` is `[N]`, a pid in `@test_31493_tmp`, a port in
/// `localhost:8080`, `"random_seed": 190085893,`), and each run of letters
/// and digits that holds a digit and looks random (a hash or temporary
/// name: six hex digits or more, or eight letters and digits) as `*`.
/// What groups commands, aligns two runs and tells a loop's runs alike.
pub fn fold_volatile(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphanumeric()) {
        folded.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        let run = &rest[..end];
        let digits = run.bytes().filter(u8::is_ascii_digit).count();
        let hex = run.bytes().all(|b| b.is_ascii_hexdigit());
        folded.push_str(match digits {
            _ if digits == run.len() => "N",
            1.. if run.len() >= 8 || (hex && run.len() >= 6) => "*",
            _ => run,
        });
        rest = &rest[end..];
    }
    folded.push_str(rest);
    folded
}

#[cfg(test)]
mod tests {
    use super::fold_argument;

    #[test]
    fn arguments_fold_what_differs_between_runs() {
        assert_eq!(fold_argument("src/main.c"), "*.c");
        assert_eq!(fold_argument("42"), "N");
        assert_eq!(fold_argument("0.5"), "N");
        assert_eq!(fold_argument("-O2"), "-O2");
        assert_eq!(fold_argument("/tmp/x/y"), "*");
        assert_eq!(fold_argument("install"), "install");
        assert_eq!(fold_argument(".hidden"), ".hidden");
        assert_eq!(fold_argument("/opt/python/3.11.7"), "N");
        assert_eq!(fold_argument("--jobs=4"), "--jobs=N");
        assert_eq!(
            fold_argument("-plugin-opt=-fresolution=/tmp/ccz13pf.res"),
            "-plugin-opt=-fresolution=*.res"
        );
        assert_eq!(fold_argument("--color=auto"), "--color=auto");
        assert_eq!(fold_argument("cc -c  src/f17.c"), "cc -c *.c");
        assert_eq!(fold_argument("job 17"), "job N");
        // Inside a word, what changes from run to run.
        assert_eq!(fold_argument("[31493]"), "[N]");
        assert_eq!(fold_argument("@test_30765_tmpæ"), "@test_N_tmpæ");
        assert_eq!(fold_argument("localhost:8080"), "localhost:N");
        assert_eq!(
            fold_argument(r#"{"tests": ["test_json"], "random_seed": 190085893}"#),
            r#"{"tests": ["test_json"], "random_seed": N}"#
        );
        assert_eq!(fold_argument("tmpk3j2x9qa"), "tmp*");
        assert_eq!(fold_argument("tmp.AbCdEfGhIj"), "tmp*");
        assert_eq!(fold_argument("build-k3j2x9qa"), "build-*");
        assert_eq!(fold_argument("deadbeef cafe"), "deadbeef cafe");
        assert_eq!(fold_argument("x.3fa9c0"), "x.*");
        assert_eq!(fold_argument("python3"), "python3");
        assert_eq!(fold_argument("-O2"), "-O2");
    }
}
