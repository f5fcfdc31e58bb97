//! `cargo xtask vm-test`: warden's BPF LSM path (issue #5) in a qemu guest, because the
//! machines we develop on refuse BPF LSM programs (EPERM). See vm-tests/README.md.
//!
//! Steps, each printed: the packages (qemu-system-x86, busybox-static, cpio), `cargo build -p
//! warden`, a Debian cloud kernel from apt (`apt-get download` + `dpkg-deb -x`, cached in
//! target/vm-test/), a static isa-debug-exit helper, an initramfs with busybox, warden and its
//! shared libraries (ldd) and the guest script (vm-tests/guest/lsm.sh), then qemu with TCG. The
//! guest's result is its isa-debug-exit status and its serial marker, both required. Before the
//! guest, the host check: where BPF LSM is refused, `warden.audit.enforce: true` must fail
//! closed (exit 125).

use anyhow::{bail, Context, Result};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The kernel: Debian bookworm's 6.12 cloud image (bookworm-security), resolved to the real
/// package through its metapackage.
const KERNEL_META: &str = "linux-image-6.12-cloud-amd64";
/// What the guest needs on the host.
const PACKAGES: &[&str] = &["qemu-system-x86", "busybox-static", "cpio"];
/// isa-debug-exit: the guest writes 16 on success (qemu exits 33), 1 on failure (3).
const PASS_STATUS: i32 = (16 << 1) | 1;
const PASS_MARKER: &str = "WARDEN-VM-PASS";
const FAIL_MARKER: &str = "WARDEN-VM-FAIL";
/// The whole guest run, boot to poweroff (measured: 28–48 s under TCG on 2 cores).
const GUEST_TIMEOUT: Duration = Duration::from_secs(600);
const KERNEL_CMDLINE: &str =
    "console=ttyS0 panic=-1 quiet lsm=lockdown,capability,landlock,yama,bpf";

pub fn vm_test() -> Result<()> {
    let start = Instant::now();
    let dir = super::root().join("target/vm-test");
    fs::create_dir_all(&dir)?;
    timed("packages", || super::apt_install(PACKAGES))?;
    timed("cargo build -p warden", || {
        super::run_cmd(&mut super::cargo(&["build", "-p", "warden"]))
    })?;
    let warden = super::root().join("target/debug/warden");
    timed("host: enforce without BPF LSM fails closed", || {
        host_fails_closed(&warden, &dir)
    })?;
    let kernel = timed("kernel", || kernel(&dir))?;
    let outb = timed("isa-debug-exit helper", || outb(&dir))?;
    let initrd = timed("initramfs", || initramfs(&dir, &warden, &outb))?;
    let (mut status, mut serial) = timed("qemu (TCG)", || qemu(&kernel, &initrd, &dir))?;
    // A guest kernel that panics before userspace starts (no "WARDEN-VM" line at all: the
    // test never ran) is the emulator's, not the test's — seen once in ~10 boots, an int3
    // in sched_clock_cpu during boot under TCG. One more boot, said out loud; a panic after
    // the test started fails as it is.
    if !serial.contains("WARDEN-VM") && serial.contains("Kernel panic") {
        println!(
            "vm-test: the guest kernel panicked while booting, before the test started \
             (TCG); booting once more"
        );
        (status, serial) = timed("qemu (TCG), second boot", || qemu(&kernel, &initrd, &dir))?;
    }
    let passed = status == Some(PASS_STATUS)
        && serial.lines().any(|l| l.trim() == PASS_MARKER)
        && !serial.contains(FAIL_MARKER);
    for line in serial.lines().filter(|l| l.contains("WARDEN-VM")) {
        println!("vm-test: {line}");
    }
    println!("vm-test: serial log {}", dir.join("serial.log").display());
    if !passed {
        bail!("the guest failed (qemu status {status:?}, want {PASS_STATUS}; see the serial log)");
    }
    println!("vm-test: passed in {:.1}s", start.elapsed().as_secs_f64());
    Ok(())
}

fn timed<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    println!("\n==> vm-test: {what}");
    let start = Instant::now();
    let out = f().with_context(|| format!("vm-test step `{what}`"))?;
    println!("==> vm-test: {what}: {:.1}s", start.elapsed().as_secs_f64());
    Ok(out)
}

fn output(cmd: &mut Command) -> Result<String> {
    println!("vm-test: {}", super::show(cmd));
    let out = cmd
        .output()
        .with_context(|| format!("cannot start `{}`", super::show(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            super::show(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// On a host whose kernel refuses BPF LSM (ours: EPERM), `warden.audit.enforce: true` without
/// a fallback must refuse to run with exit 125, and with `enforceFallback: "tracepoints"` run.
/// Skipped (with a line saying so) where BPF LSM works or warden is not root.
fn host_fails_closed(warden: &Path, dir: &Path) -> Result<()> {
    let doctor = Command::new(warden).arg("doctor").output()?;
    let text = String::from_utf8_lossy(&doctor.stdout);
    let Some(line) = text.lines().find(|l| l.contains(" audit.lsm:")) else {
        bail!("warden doctor printed no audit.lsm line:\n{text}");
    };
    println!("vm-test: host: {line}");
    if line.starts_with("ok") || !super::is_root() {
        println!("vm-test: host: skipped (BPF LSM works here, or not root)");
        return Ok(());
    }
    let settings = dir.join("host-enforce.json");
    fs::write(&settings, r#"{"warden": {"audit": {"enforce": true}}}"#)?;
    let out = Command::new(warden)
        .args(["run", "--settings"])
        .arg(&settings)
        .args(["--", "true"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "vm-test: host: enforce: exit {:?}: {}",
        out.status.code(),
        stderr.trim()
    );
    if out.status.code() != Some(125) || !stderr.contains("BPF LSM is unavailable") {
        bail!("enforce without BPF LSM did not fail closed with exit 125");
    }
    let fallback = dir.join("host-fallback.json");
    fs::write(
        &fallback,
        r#"{"warden": {"audit": {"enforce": true, "enforceFallback": "tracepoints"}}}"#,
    )?;
    let out = Command::new(warden)
        .args(["run", "--settings"])
        .arg(&fallback)
        .args(["--", "true"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "vm-test: host: fallback: exit {:?}: {}",
        out.status.code(),
        stderr.trim()
    );
    if out.status.code() != Some(0) || !stderr.contains("enforceFallback") {
        bail!("enforceFallback \"tracepoints\" did not run with a warning");
    }
    Ok(())
}

/// The kernel image, downloaded once into target/vm-test/kernel/.
fn kernel(dir: &Path) -> Result<PathBuf> {
    let kdir = dir.join("kernel");
    fs::create_dir_all(&kdir)?;
    let deps = output(Command::new("apt-cache").args(["depends", KERNEL_META]))?;
    let Some(package) = deps
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: "))
        .filter(|p| p.starts_with("linux-image-"))
        .map(str::to_string)
    else {
        bail!("apt-cache depends {KERNEL_META} names no kernel package (apt-get update?)");
    };
    let extracted = kdir.join(&package);
    let find = |root: &Path| -> Option<PathBuf> {
        fs::read_dir(root.join("boot"))
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
            })
    };
    if let Some(k) = find(&extracted) {
        return Ok(k);
    }
    super::run_cmd(
        Command::new("apt-get")
            .args(["download", &package])
            .current_dir(&kdir),
    )?;
    let deb = fs::read_dir(&kdir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&format!("{package}_")) && n.ends_with(".deb")
            })
        })
        .with_context(|| format!("apt-get download {package} left no .deb"))?;
    super::run_cmd(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&extracted))?;
    find(&extracted).with_context(|| format!("no vmlinuz in {}", deb.display()))
}

/// The static isa-debug-exit helper (vm-tests/guest/outb.c).
fn outb(dir: &Path) -> Result<PathBuf> {
    let out = dir.join("outb");
    let source = super::root().join("vm-tests/guest/outb.c");
    let clang = ["clang-19", "clang", "cc"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
        .context("no C compiler (clang-19, clang or cc)")?;
    super::run_cmd(
        Command::new(clang)
            .args(["-static", "-O2", "-o"])
            .arg(&out)
            .arg(&source),
    )?;
    Ok(out)
}

/// The shared libraries `binary` loads (ldd), with the dynamic loader.
fn shared_libs(binary: &Path) -> Result<Vec<PathBuf>> {
    let text = output(Command::new("ldd").arg(binary))?;
    Ok(text
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .collect())
}

/// Copies `src` to `root` + `dst` (absolute), creating the directories.
fn install(root: &Path, src: &Path, dst: &Path) -> Result<()> {
    let target = root.join(dst.strip_prefix("/").unwrap_or(dst));
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(src, &target)
        .with_context(|| format!("copying {} to {}", src.display(), target.display()))?;
    Ok(())
}

/// The initramfs (uncompressed newc cpio: the guest unpacks it faster than gzip under TCG).
fn initramfs(dir: &Path, warden: &Path, outb: &Path) -> Result<PathBuf> {
    let root = dir.join("root");
    if root.exists() {
        fs::remove_dir_all(&root)?;
    }
    for d in ["bin", "proc", "sys", "dev", "tmp", "etc", "root"] {
        fs::create_dir_all(root.join(d))?;
    }
    let busybox = Path::new("/bin/busybox");
    install(&root, busybox, Path::new("/bin/busybox"))?;
    let applets = output(Command::new(busybox).arg("--list"))?;
    for applet in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        let link = root.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", &link)?;
        }
    }
    // warden without its debug info (the guest's page cache is its RAM).
    let stripped = root.join("bin/warden");
    super::run_cmd(
        Command::new("objcopy")
            .arg("--strip-debug")
            .arg(warden)
            .arg(&stripped),
    )?;
    for lib in shared_libs(warden)? {
        install(&root, &lib, &lib)?;
    }
    install(&root, outb, Path::new("/bin/outb"))?;
    let guest = super::root().join("vm-tests/guest");
    install(&root, &guest.join("init"), Path::new("/init"))?;
    install(&root, &guest.join("lsm.sh"), Path::new("/test.sh"))?;
    fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")?;
    fs::write(root.join("etc/group"), "root:x:0:\n")?;
    for exe in ["init", "test.sh"] {
        super::run_cmd(Command::new("chmod").arg("755").arg(root.join(exe)))?;
    }
    let initrd = dir.join("initrd.cpio");
    let list = output(Command::new("find").arg(".").current_dir(&root))?;
    let file = fs::File::create(&initrd)?;
    let mut cpio = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(file)
        .spawn()
        .context("starting cpio")?;
    cpio.stdin
        .take()
        .context("cpio's stdin")?
        .write_all(list.as_bytes())?;
    let status = cpio.wait()?;
    if !status.success() {
        bail!("cpio failed ({status})");
    }
    println!(
        "vm-test: {} ({} MB)",
        initrd.display(),
        fs::metadata(&initrd)?.len() / 1_000_000
    );
    Ok(initrd)
}

/// Boots the guest; returns qemu's exit status and the serial output.
fn qemu(kernel: &Path, initrd: &Path, dir: &Path) -> Result<(Option<i32>, String)> {
    let log = dir.join("serial.log");
    let mut cmd = Command::new("timeout");
    cmd.arg(GUEST_TIMEOUT.as_secs().to_string())
        .args([
            "qemu-system-x86_64",
            "-accel",
            "tcg",
            "-cpu",
            "max",
            "-m",
            "1G",
        ])
        .args(["-smp", "2", "-nographic", "-no-reboot"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", KERNEL_CMDLINE])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log)?)
        .stderr(Stdio::inherit());
    println!("vm-test: {}", super::show(&cmd));
    let status = cmd.status().context("starting qemu")?;
    let serial = String::from_utf8_lossy(&fs::read(&log)?).into_owned();
    Ok((status.code(), serial))
}
