//! Compiles the BPF program and generates its libbpf-rs skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/proctrace.bpf.c";
const HEADER: &str = "src/bpf/proctrace.h";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("proctrace.skel.rs");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("set by cargo");
    // CO-RE: the vendored vmlinux.h, never the build machine's kernel.
    let vmlinux = manifest.join("vmlinux").join(&arch);
    assert!(
        vmlinux.join("vmlinux.h").exists(),
        "no vendored vmlinux.h for {arch} under vmlinux/"
    );

    SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            "-I".as_ref(),
            vmlinux.as_os_str(),
            "-I".as_ref(),
            manifest.join("src/bpf").as_os_str(),
            "-O2".as_ref(),
            "-g".as_ref(),
            "-Wall".as_ref(),
        ])
        .build_and_generate(&out)
        .unwrap_or_else(|err| panic!("building {SRC}: {err:#}"));
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-changed={}", vmlinux.display());
}
