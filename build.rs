//! Compiles the BPF program and generates its libbpf-rs skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/proctrace.bpf.c";
/// The BPF program's headers (src/bpf/*.h) are rebuilt on change with it.
const BPF_DIR: &str = "src/bpf";
/// Targets whose syscall numbers and registers src/bpf/arch.bpf.h knows: Rust's
/// name for each, and the kernel's, which picks its part of arch.bpf.h.
const SUPPORTED_ARCHES: &[(&str, &str)] = &[("x86_64", "x86"), ("aarch64", "arm64")];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("proctrace.skel.rs");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("set by cargo");
    let Some(&(_, kernel_arch)) = SUPPORTED_ARCHES.iter().find(|(rust, _)| *rust == arch) else {
        let known: Vec<_> = SUPPORTED_ARCHES.iter().map(|(rust, _)| *rust).collect();
        panic!(
            "proctrace supports {known:?}, not {arch}: src/bpf/arch.bpf.h has no syscall \
             numbers or registers for it, and vmlinux/ no headers"
        );
    };
    // CO-RE: the vendored vmlinux.h, never the build machine's kernel.
    let vmlinux = manifest.join("vmlinux").join(&arch);
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
