//! Builds the eBPF skeletons of `ebpf/warden.bpf.c` and `ebpf/warden_lsm.bpf.c` (Linux targets
//! only): `vmlinux.h` from the build machine's kernel BTF with bpftool (or the file
//! `WARDEN_VMLINUX_H` names), the objects with clang (`WARDEN_BPF_CLANG`, else `clang-19`, else
//! `clang`), and the Rust skeletons with libbpf-cargo into `OUT_DIR/warden.skel.rs` and
//! `OUT_DIR/warden_lsm.skel.rs`. Two objects: the BPF LSM programs are loaded on their own, so
//! a kernel that refuses them still loads the tracepoints. See ebpf/README.md.

use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGES: &str = "clang-19 libbpf-dev libelf-dev zlib1g-dev pkg-config bpftool";

fn fail(message: &str) -> ! {
    eprintln!("error: building warden's eBPF programs: {message}");
    eprintln!(
        "hint: `cargo xtask setup` installs what the build needs, or by hand: \
         apt-get install -y {PACKAGES}"
    );
    std::process::exit(1);
}

fn works(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn clang() -> String {
    if let Ok(c) = std::env::var("WARDEN_BPF_CLANG") {
        if works(&c) {
            return c;
        }
        fail(&format!("WARDEN_BPF_CLANG={c} does not run"));
    }
    for c in ["clang-19", "clang"] {
        if works(c) {
            return c.to_string();
        }
    }
    fail("no clang found (clang-19 or clang; the programs are C compiled for the bpf target)");
}

fn vmlinux_h(out: &Path) -> PathBuf {
    let dest = out.join("vmlinux.h");
    if let Ok(p) = std::env::var("WARDEN_VMLINUX_H") {
        if let Err(e) = std::fs::copy(&p, &dest) {
            fail(&format!("copying WARDEN_VMLINUX_H={p}: {e}"));
        }
        return dest;
    }
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    if !btf.exists() {
        fail(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux); set WARDEN_VMLINUX_H to a \
             vmlinux.h generated on a machine with BTF (`bpftool btf dump file \
             /sys/kernel/btf/vmlinux format c`)",
        );
    }
    let bpftool = ["bpftool", "/usr/sbin/bpftool"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| fail("no bpftool found (it generates vmlinux.h from the kernel's BTF)"));
    let output = Command::new(bpftool)
        .args(["btf", "dump", "file"])
        .arg(btf)
        .args(["format", "c"])
        .output()
        .unwrap_or_else(|e| fail(&format!("running bpftool: {e}")));
    if !output.status.success() {
        fail(&format!(
            "bpftool btf dump failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if let Err(e) = std::fs::write(&dest, &output.stdout) {
        fail(&format!("writing {}: {e}", dest.display()));
    }
    dest
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../ebpf/warden.bpf.c");
    println!("cargo:rerun-if-changed=../ebpf/warden.bpf.h");
    println!("cargo:rerun-if-changed=../ebpf/emit.bpf.h");
    println!("cargo:rerun-if-changed=../ebpf/warden_lsm.bpf.c");
    println!("cargo:rerun-if-env-changed=WARDEN_BPF_CLANG");
    println!("cargo:rerun-if-env-changed=WARDEN_VMLINUX_H");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR unset")));
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| fail("CARGO_MANIFEST_DIR unset")),
    );
    let ebpf = manifest.join("../ebpf");
    let clang = clang();
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok(other) => fail(&format!(
            "the audit programs support x86_64 only so far (target architecture {other})"
        )),
        Err(_) => fail("CARGO_CFG_TARGET_ARCH unset"),
    };
    vmlinux_h(&out);
    for (source, skel) in [
        ("warden.bpf.c", "warden.skel.rs"),
        ("warden_lsm.bpf.c", "warden_lsm.skel.rs"),
    ] {
        let source = ebpf.join(source);
        let result = libbpf_cargo::SkeletonBuilder::new()
            .source(&source)
            .clang(&clang)
            .clang_args([
                format!("-I{}", out.display()),
                format!("-I{}", ebpf.display()),
                format!("-D__TARGET_ARCH_{arch}"),
                "-O2".to_string(),
                "-g".to_string(),
                "-Wall".to_string(),
            ])
            .build_and_generate(out.join(skel));
        if let Err(e) = result {
            fail(&format!(
                "compiling {} with {clang}: {e:#}",
                source.display()
            ));
        }
    }
}
