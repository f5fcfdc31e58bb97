use super::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

#[test]
fn lexical_normalises_dots_and_slashes() {
    let cwd = Path::new("/home/u/proj");
    assert_eq!(
        lexical(cwd, Path::new("a/./b//c/")),
        p("/home/u/proj/a/b/c")
    );
    assert_eq!(lexical(cwd, Path::new("../../etc/x")), p("/home/etc/x"));
    assert_eq!(lexical(cwd, Path::new("/../../..")), p("/"));
    assert_eq!(lexical(cwd, Path::new("//etc///passwd")), p("/etc/passwd"));
}

#[test]
fn resolve_follows_relative_and_absolute_links() {
    let mut fs = MemFs::new();
    fs.dir("/home/u/proj")
        .symlink("/home/u/proj/out", "/etc")
        .symlink("/home/u/proj/up", "../..")
        .symlink("/home/u/proj/chain", "out");
    let cwd = Path::new("/home/u/proj");
    assert_eq!(
        resolve(&fs, cwd, Path::new("out/passwd")).unwrap(),
        p("/etc/passwd")
    );
    assert_eq!(resolve(&fs, cwd, Path::new("up/x")).unwrap(), p("/home/x"));
    assert_eq!(
        resolve(&fs, cwd, Path::new("chain/shadow")).unwrap(),
        p("/etc/shadow")
    );
    // `..` after a symlink applies to the target, as in the kernel.
    assert_eq!(
        resolve(&fs, cwd, Path::new("out/../root")).unwrap(),
        p("/root")
    );
}

#[test]
fn resolve_continues_through_missing_components() {
    let mut fs = MemFs::new();
    fs.dir("/w");
    let cwd = Path::new("/w");
    assert_eq!(
        resolve(&fs, cwd, Path::new("new/dir/../f")).unwrap(),
        p("/w/new/f")
    );
    assert_eq!(
        resolve(&fs, cwd, Path::new("missing/../../etc")).unwrap(),
        p("/etc")
    );
}

#[test]
fn resolve_follows_a_link_reached_again_after_missing_dotdot() {
    let mut fs = MemFs::new();
    fs.dir("/w").symlink("/w/l", "/etc");
    assert_eq!(
        resolve(&fs, Path::new("/w"), Path::new("nope/../l/x")).unwrap(),
        p("/etc/x")
    );
}

#[test]
fn resolve_detects_loops() {
    let mut fs = MemFs::new();
    fs.symlink("/a", "/b").symlink("/b", "/a");
    assert!(resolve(&fs, Path::new("/"), Path::new("/a/x")).is_err());
}

#[test]
fn is_under_is_component_wise() {
    assert!(is_under(b"/a/b", b"/a/b"));
    assert!(is_under(b"/a/b/c", b"/a/b"));
    assert!(!is_under(b"/a/bc", b"/a/b"));
    assert!(!is_under(b"/a", b"/a/b"));
    assert!(is_under(b"/anything", b"/"));
}

#[test]
fn real_fs_sees_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::os::unix::fs::symlink("/etc", root.join("l")).unwrap();
    assert_eq!(RealFs.kind(&root.join("l")), Some(FileKind::Symlink));
    assert_eq!(
        resolve(&RealFs, &root, Path::new("l/hostname")).unwrap(),
        p("/etc/hostname")
    );
}

#[test]
fn escapes_entry_knows_the_system_aliases_and_nothing_else() {
    let mut fs = MemFs::new();
    fs.dir("/run/user/1000")
        .dir("/home/u/.ssh")
        .dir("/home/u/proj")
        .symlink("/var/run", "/run")
        .symlink("/home/u/proj/out", "/home/u/.ssh")
        .symlink("/run/user/1000/planted", "/home/u/.ssh")
        .symlink("/varx", "/home/u/.ssh");
    let esc = |entry: &str| {
        let real = resolve(&fs, Path::new("/"), Path::new(entry)).unwrap();
        escapes_entry(&fs, Path::new(entry), &real)
    };
    assert!(!esc("/var/run/user/1000"));
    assert!(!esc("/run/user/1000"));
    assert!(!esc("/home/u/proj"));
    assert!(esc("/home/u/proj/out"));
    // An alias on the way does not excuse a link after it.
    assert!(esc("/var/run/user/1000/planted"));
    // A name that only starts like an alias is not one.
    assert!(esc("/varx"));
}

#[test]
fn read_regular_file_refuses_fifos_devices_and_large_files_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let t = std::time::Instant::now();
    assert!(read_regular_file(&fifo, 1024).is_err());
    assert!(read_regular_file(Path::new("/dev/zero"), 1024).is_err());
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    assert!(read_regular_file(&link, 1024).is_err());
    assert!(RealFs.read_to_string(&fifo).is_none());
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; 2000]).unwrap();
    assert!(read_regular_file(&big, 1024).is_err());
    assert_eq!(read_regular_file(&big, 2000).unwrap().len(), 2000);
}
