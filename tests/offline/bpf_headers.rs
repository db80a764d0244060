//! Every header of the BPF side compiles on its own, for every
//! architecture vmlinux/ has headers for: each includes what it uses, so
//! a header can be read, moved or reused without knowing what the .c file
//! happened to include before it.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// clang's name for the architecture of a vmlinux/ directory.
fn target_arch(dir: &str) -> &str {
    match dir {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("vmlinux/{other}: which __TARGET_ARCH is it?"),
    }
}

#[test]
fn every_bpf_header_compiles_alone() {
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    if !have_tool(&clang) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The same libbpf headers the build compiles against.
    let libbpf = tempfile::tempdir().unwrap();
    fs::create_dir(libbpf.path().join("bpf")).unwrap();
    for (name, text) in libbpf_rs::libbpf_sys::API_HEADERS {
        fs::write(libbpf.path().join("bpf").join(name), text).unwrap();
    }
    let mut headers: Vec<_> = fs::read_dir(root.join("src/bpf"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "h"))
        .collect();
    headers.sort();
    assert!(headers.len() > 5, "{headers:?}");
    for arch in fs::read_dir(root.join("vmlinux")).unwrap() {
        let arch = arch.unwrap().file_name().into_string().unwrap();
        for header in &headers {
            let out = Command::new(&clang)
                .args(["-target", "bpf", "-fsyntax-only", "-Wall", "-Werror"])
                .arg("-Wno-unused-function")
                .arg(format!("-D__TARGET_ARCH_{}", target_arch(&arch)))
                .arg("-I")
                .arg(root.join("vmlinux").join(&arch))
                .arg("-I")
                .arg(root.join("src/bpf"))
                .arg("-I")
                .arg(libbpf.path())
                .args(["-x", "c"])
                .arg(header)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{} does not compile alone for {arch}:\n{}",
                header.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
