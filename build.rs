//! Compiles the BPF program and generates its libbpf-rs skeleton (feature
//! `recorder`), and says what `proctrace --version` prints.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("set by cargo");
    version_info(&manifest, &arch);
    // Without the recorder nothing needs clang, libbpf or the kernel's
    // headers: the library reads and renders recordings only.
    #[cfg(feature = "recorder")]
    bpf::build(&manifest, &arch);
}

#[cfg(feature = "recorder")]
mod bpf {
    use std::env;
    use std::path::{Path, PathBuf};

    use libbpf_cargo::SkeletonBuilder;

    const SRC: &str = "src/bpf/proctrace.bpf.c";
    /// The BPF program's headers (src/bpf/*.h) are rebuilt on change with it.
    const BPF_DIR: &str = "src/bpf";
    /// Targets whose syscall numbers and registers src/bpf/arch.bpf.h knows: Rust's
    /// name for each, and the kernel's, which picks its part of arch.bpf.h.
    const SUPPORTED_ARCHES: &[(&str, &str)] = &[("x86_64", "x86"), ("aarch64", "arm64")];

    pub fn build(manifest: &Path, arch: &str) {
        let out =
            PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("proctrace.skel.rs");
        let Some(&(_, kernel_arch)) = SUPPORTED_ARCHES.iter().find(|(rust, _)| *rust == arch)
        else {
            let known: Vec<_> = SUPPORTED_ARCHES.iter().map(|(rust, _)| *rust).collect();
            panic!(
                "proctrace supports {known:?}, not {arch}: src/bpf/arch.bpf.h has no syscall \
                 numbers or registers for it, and vmlinux/ no headers"
            );
        };
        // CO-RE: the vendored vmlinux.h, never the build machine's kernel.
        let vmlinux = manifest.join("vmlinux").join(arch);
        assert!(
            vmlinux.join("vmlinux.h").exists(),
            "no vendored vmlinux.h for {arch} under vmlinux/"
        );

        let mut args: Vec<std::ffi::OsString> = vec![
            format!("-D__TARGET_ARCH_{kernel_arch}").into(),
            "-I".into(),
            vmlinux.as_os_str().into(),
            "-I".into(),
            manifest.join(BPF_DIR).into(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
        ];
        // As packagers expect: CLANG picks the compiler, BPF_CFLAGS adds flags
        // after ours (so they can override them).
        args.extend(
            env::var("BPF_CFLAGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(Into::into),
        );
        let mut builder = SkeletonBuilder::new();
        builder.source(SRC).clang_args(args);
        if let Some(clang) = env::var_os("CLANG") {
            builder.clang(clang);
        }
        builder
            .build_and_generate(&out)
            .unwrap_or_else(|err| panic!("building {SRC}: {err:#}"));
        println!("cargo:rerun-if-changed={BPF_DIR}");
        println!("cargo:rerun-if-changed={}", vmlinux.display());
        println!("cargo:rerun-if-env-changed=CLANG");
        println!("cargo:rerun-if-env-changed=BPF_CFLAGS");
    }
}

/// What `proctrace --version` says besides the version: the commit (from
/// git where the source is a clone; "unknown" in a crate's tarball), the
/// target architecture and the crate features built in. Not whether the
/// tree had changes: cargo reruns this for a new commit, not for an edit.
fn version_info(manifest: &Path, arch: &str) {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let mut features: Vec<String> = env::vars()
        .filter_map(|(key, _)| key.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .map(|feature| feature.to_lowercase().replace('_', "-"))
        .filter(|feature| feature != "default")
        .collect();
    features.sort();
    println!(
        "cargo:rustc-env=PROCTRACE_BUILD_INFO=commit {commit}, {arch}, features: {}",
        features.join(" ")
    );
    // HEAD names the branch, whose ref moves with each commit (in the
    // common directory of a worktree, or in packed-refs).
    let refs = ["HEAD", "packed-refs"].map(String::from);
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in refs.iter().chain(&branch) {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            println!("cargo:rerun-if-changed={}", manifest.join(path).display());
        }
    }
}
