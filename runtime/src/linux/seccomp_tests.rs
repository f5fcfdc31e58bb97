//! The filter is checked twice: by evaluating the BPF program on synthetic `seccomp_data` (every
//! rule, including calls too dangerous to issue for real), and by installing it in a forked
//! child and issuing real system calls. The children only make raw libc calls (the test binary
//! is multi-threaded, so nothing that allocates or locks after `fork`).

use super::*;
use crate::linux::child_probe::{errno, fork_probe, res};

const EPERM: i64 = libc::EPERM as i64;
const ENOSYS: i64 = libc::ENOSYS as i64;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const DENY: u32 = libc::SECCOMP_RET_ERRNO | DENY_ERRNO;
const DENY_NOSYS: u32 = libc::SECCOMP_RET_ERRNO | CLONE3_ERRNO;
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;

fn default_opts() -> SeccompOptions {
    SeccompOptions::default()
}

fn permissive_opts() -> SeccompOptions {
    SeccompOptions {
        allow_unix_sockets: true,
        allow_namespaces: true,
    }
}

// ---------------------------------------------------------------------------------------------
// A classic-BPF interpreter for the subset seccompiler and `patch_prefix` emit.

fn eval(prog: &[sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
    let mut data = [0u32; 16];
    data[0] = nr as u32;
    data[1] = arch;
    for (i, a) in args.iter().enumerate() {
        data[4 + 2 * i] = *a as u32;
        data[5 + 2 * i] = (*a >> 32) as u32;
    }
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let ins = &prog[pc];
        let k = ins.k;
        let step = |cond: bool| 1 + usize::from(if cond { ins.jt } else { ins.jf });
        pc += match ins.code {
            0x20 => {
                assert_eq!(k % 4, 0, "unaligned load at {pc}");
                acc = data[(k / 4) as usize];
                1
            }
            0x54 => {
                acc &= k;
                1
            }
            0x05 => 1 + k as usize,
            0x15 => step(acc == k),
            0x25 => step(acc > k),
            0x35 => step(acc >= k),
            0x06 => return k,
            code => panic!("unexpected opcode {code:#x} at {pc}"),
        };
        assert!(pc < prog.len(), "jumped off the end of the program");
    }
}

fn native(prog: &[sock_filter], nr: i64, args: [u64; 6]) -> u32 {
    eval(prog, AUDIT_ARCH_X86_64, nr, args)
}

fn a(args: &[u64]) -> [u64; 6] {
    let mut out = [0u64; 6];
    out[..args.len()].copy_from_slice(args);
    out
}

fn u(v: libc::c_int) -> u64 {
    u64::from(v as u32)
}

/// Each combination of options the sandbox uses.
fn every_option_set() -> [SeccompOptions; 3] {
    [
        default_opts(),
        permissive_opts(),
        SeccompOptions {
            allow_unix_sockets: true,
            allow_namespaces: false,
        },
    ]
}

#[test]
fn build_is_deterministic_and_non_empty() {
    for opts in every_option_set() {
        let first = build(&opts).unwrap();
        let second = build(&opts).unwrap();
        assert_eq!(first, second);
        assert!(
            first.len() > 20,
            "suspiciously short program: {}",
            first.len()
        );
        assert!(first.len() <= MAX_INSTRUCTIONS);
    }
    assert_ne!(
        build(&default_opts()).unwrap(),
        build(&permissive_opts()).unwrap()
    );
}

#[test]
fn prefix_is_patched_as_documented() {
    let prog = build(&default_opts()).unwrap();
    assert_eq!(prog[0], stmt(BPF_LD_W_ABS, SECCOMP_DATA_ARCH));
    assert_eq!(prog[1], jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0));
    assert_eq!(prog[2], stmt(BPF_RET_K, DENY));
    assert_eq!(prog[3], stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR));
    assert_eq!(prog[4], jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1));
    assert_eq!(prog[5], stmt(BPF_RET_K, DENY));
    assert_eq!(prog[6], jump(BPF_JMP_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    assert_eq!(prog[7], stmt(BPF_RET_K, DENY_NOSYS));
    // Then the dispatch tree (JGE nodes, then RET ALLOW), then seccompiler's body, which
    // starts again with loading the syscall number.
    let body = |prog: &[sock_filter], tree_at: usize| {
        let allow = tree_at
            + prog[tree_at..]
                .iter()
                .position(|i| i.code != BPF_JMP_JGE_K)
                .unwrap();
        assert!(allow > tree_at + 10, "a tree of {} nodes", allow - tree_at);
        assert_eq!(prog[allow], stmt(BPF_RET_K, ALLOW));
        assert_eq!(prog[allow + 1], stmt(BPF_RET_K, DENY));
        allow + 2
    };
    let at = body(&prog, 8);
    assert_eq!(prog[at], stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR));

    let nested = build(&permissive_opts()).unwrap();
    assert_eq!(nested[5], stmt(BPF_RET_K, DENY));
    let at = body(&nested, 6);
    assert_eq!(nested[at], stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR));
}

#[test]
fn patch_prefix_refuses_an_unknown_layout() {
    let mut prog = build(&default_opts()).unwrap();
    prog[2] = stmt(BPF_RET_K, ALLOW);
    assert!(matches!(
        patch_prefix(&mut prog, AUDIT_ARCH_X86_64, &default_opts()),
        Err(SeccompError::Layout(_))
    ));
    let mut short = vec![stmt(BPF_RET_K, ALLOW)];
    assert!(matches!(
        patch_prefix(&mut short, AUDIT_ARCH_X86_64, &default_opts()),
        Err(SeccompError::Layout(_))
    ));
}

#[test]
fn foreign_abis_are_refused() {
    let prog = build(&permissive_opts()).unwrap();
    // i386 getpid (20) through int 0x80.
    assert_eq!(eval(&prog, AUDIT_ARCH_I386, 20, a(&[])), DENY);
    // x32 getpid, and the top of the number space.
    assert_eq!(native(&prog, 0x4000_0000 + 39, a(&[])), DENY);
    assert_eq!(native(&prog, 0xffff_ffff, a(&[])), DENY);
    assert_eq!(native(&prog, libc::SYS_getpid, a(&[])), ALLOW);
}

#[test]
fn unconditional_denials() {
    let always = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
        libc::SYS_clock_adjtime,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
    ];
    let namespaces = [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        SYS_OPEN_TREE_ATTR,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
    ];
    let strict = build(&default_opts()).unwrap();
    let nested = build(&permissive_opts()).unwrap();
    for nr in always {
        assert_eq!(native(&strict, nr, a(&[1, 2, 3])), DENY, "syscall {nr}");
        assert_eq!(
            native(&nested, nr, a(&[1, 2, 3])),
            DENY,
            "syscall {nr} (nested)"
        );
    }
    for nr in namespaces {
        assert_eq!(native(&strict, nr, a(&[1, 2, 3])), DENY, "syscall {nr}");
        assert_eq!(
            native(&nested, nr, a(&[1, 2, 3])),
            ALLOW,
            "syscall {nr} (nested)"
        );
    }
    for nr in [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_openat,
        libc::SYS_execve,
        libc::SYS_getpid,
        libc::SYS_landlock_restrict_self,
    ] {
        assert_eq!(native(&strict, nr, a(&[1, 2, 3])), ALLOW, "syscall {nr}");
    }
}

#[test]
fn unix_datagram_socketpairs_are_refused_stream_ones_allowed() {
    let strict = build(&default_opts()).unwrap();
    let pair =
        |prog: &_, family: u64, ty: u64| native(prog, libc::SYS_socketpair, a(&[family, ty, 0]));
    let unix = u64::from(libc::AF_UNIX as u32);
    let dgram = u64::from(libc::SOCK_DGRAM as u32);
    let flags = u64::from((libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u32);
    assert_eq!(pair(&strict, unix, dgram), DENY);
    assert_eq!(pair(&strict, unix, dgram | flags), DENY);
    assert_eq!(pair(&strict, unix | 1 << 32, dgram | 1 << 40), DENY);
    // The kernel turns SOCK_RAW into a datagram socket for AF_UNIX; any other type too.
    for ty in [0u64, 3, 4, 6, 10, 15] {
        assert_eq!(pair(&strict, unix, ty | flags), DENY, "type {ty}");
    }
    for ty in [libc::SOCK_STREAM, libc::SOCK_SEQPACKET] {
        assert_eq!(pair(&strict, unix, u64::from(ty as u32) | flags), ALLOW);
    }
    let allowed = build(&SeccompOptions {
        allow_unix_sockets: true,
        ..default_opts()
    })
    .unwrap();
    assert_eq!(pair(&allowed, unix, dgram), ALLOW);
}

#[test]
fn ioctl_rules_compare_the_low_32_bits() {
    let prog = build(&default_opts()).unwrap();
    let ioctl = |cmd: u64| native(&prog, libc::SYS_ioctl, a(&[0, cmd, 0]));
    let tiocsti = u64::from(libc::TIOCSTI as u32);
    let tioclinux = u64::from(libc::TIOCLINUX as u32);
    assert_eq!(ioctl(tiocsti), DENY);
    assert_eq!(ioctl(tioclinux), DENY);
    assert_eq!(ioctl(u64::from(libc::TIOCSETD as u32)), DENY);
    assert_eq!(ioctl(u64::from(libc::TIOCGETD as u32)), ALLOW);
    assert_eq!(ioctl(tiocsti | 1 << 32), DENY);
    assert_eq!(ioctl(tiocsti | 0xffff_ffff_0000_0000), DENY);
    assert_eq!(ioctl(u64::from(libc::TIOCGWINSZ as u32)), ALLOW);
    assert_eq!(ioctl(u64::from(libc::FIONREAD as u32)), ALLOW);
    assert_eq!(ioctl(tiocsti + 1), ALLOW);
}

#[test]
fn socket_rules() {
    let strict = build(&default_opts()).unwrap();
    let unix_ok = build(&SeccompOptions {
        allow_unix_sockets: true,
        allow_namespaces: false,
    })
    .unwrap();
    let socket = |prog: &[sock_filter], family: u64, protocol: u64| {
        native(prog, libc::SYS_socket, a(&[family, 1, protocol]))
    };
    let af_unix = u(libc::AF_UNIX);
    assert_eq!(socket(&strict, af_unix, 0), DENY);
    assert_eq!(socket(&strict, af_unix | 1 << 32, 0), DENY);
    assert_eq!(socket(&unix_ok, af_unix, 0), ALLOW);
    for prog in [&strict, &unix_ok] {
        assert_eq!(socket(prog, u(libc::AF_INET), 0), ALLOW);
        assert_eq!(socket(prog, u(libc::AF_INET6), 0), ALLOW);
        assert_eq!(socket(prog, u(libc::AF_VSOCK), 0), DENY);
        assert_eq!(socket(prog, u(libc::AF_PACKET), 0), DENY);
        assert_eq!(socket(prog, u(libc::AF_PACKET) | 1 << 40, 0), DENY);
        let netlink = u(libc::AF_NETLINK);
        assert_eq!(socket(prog, netlink, u(libc::NETLINK_ROUTE)), ALLOW);
        assert_eq!(socket(prog, netlink, u(libc::NETLINK_AUDIT)), DENY);
        assert_eq!(
            socket(prog, netlink, 1 << 32),
            ALLOW,
            "protocol 0 once truncated"
        );
        assert_eq!(
            socket(prog, netlink, u(libc::NETLINK_AUDIT) | 1 << 32),
            DENY
        );
        assert_eq!(
            native(prog, libc::SYS_socketpair, a(&[af_unix, 1, 0, 0])),
            ALLOW
        );
    }
}

#[test]
fn personality_allows_only_the_query_and_per_linux() {
    let prog = build(&default_opts()).unwrap();
    let personality = |p: u64| native(&prog, libc::SYS_personality, a(&[p]));
    assert_eq!(personality(0), ALLOW);
    assert_eq!(personality(0xffff_ffff), ALLOW);
    assert_eq!(personality(u(libc::ADDR_NO_RANDOMIZE)), DENY);
    assert_eq!(personality(8 /* PER_LINUX32 */), DENY);
}

#[test]
fn seccomp_listener_is_refused_but_stacking_is_not() {
    let prog = build(&default_opts()).unwrap();
    let seccomp = |op: u64, flags: u64| native(&prog, libc::SYS_seccomp, a(&[op, flags, 0]));
    let filter = u64::from(libc::SECCOMP_SET_MODE_FILTER);
    let listener: u64 = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let tsync: u64 = libc::SECCOMP_FILTER_FLAG_TSYNC;
    assert_eq!(seccomp(filter, 0), ALLOW);
    assert_eq!(seccomp(filter, tsync), ALLOW);
    assert_eq!(seccomp(filter, listener), DENY);
    assert_eq!(seccomp(filter, listener | tsync), DENY);
    assert_eq!(
        seccomp(u64::from(libc::SECCOMP_GET_ACTION_AVAIL), listener),
        ALLOW
    );
}

#[test]
fn clone_rules() {
    let strict = build(&default_opts()).unwrap();
    let nested = build(&permissive_opts()).unwrap();
    let clone = |prog: &[sock_filter], flags: u64| native(prog, libc::SYS_clone, a(&[flags]));
    let sigchld = u(libc::SIGCHLD);
    let thread = u(libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD
        | libc::CLONE_SYSVSEM
        | libc::CLONE_SETTLS
        | libc::CLONE_PARENT_SETTID
        | libc::CLONE_CHILD_CLEARTID);
    assert_eq!(clone(&strict, sigchld), ALLOW);
    assert_eq!(clone(&strict, thread), ALLOW);
    assert_eq!(
        clone(&strict, u(libc::CLONE_VM | libc::CLONE_VFORK) | sigchld),
        ALLOW
    );
    for flag in CLONE_NAMESPACE_FLAGS {
        assert_eq!(clone(&strict, u(flag) | sigchld), DENY, "flag {flag:#x}");
        assert_eq!(clone(&nested, u(flag) | sigchld), ALLOW, "flag {flag:#x}");
    }
    assert_eq!(
        clone(&strict, u(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)),
        DENY
    );
    assert_eq!(native(&strict, libc::SYS_clone3, a(&[0, 88])), DENY_NOSYS);
    assert_eq!(native(&nested, libc::SYS_clone3, a(&[0, 88])), ALLOW);
}

// ---------------------------------------------------------------------------------------------
// The filter installed for real, in forked children.

/// 0 when a file descriptor was returned (and closes it), `-errno` otherwise.
fn fd_res(ret: libc::c_int) -> i64 {
    if ret < 0 {
        -errno()
    } else {
        // SAFETY: `ret` is a descriptor this process just opened and owns.
        unsafe { libc::close(ret) };
        0
    }
}

/// Forks; the child sets `no_new_privs`, installs `prog` if any, runs `probe` (which must only
/// make async-signal-safe calls) and sends the `N` values it recorded back. Returns them, or
/// `None` if the child was killed by a signal (used to detect a missing ABI).
fn try_in_child<const N: usize>(
    prog: Option<&BpfProgram>,
    probe: impl FnOnce(&mut [i64; N]),
) -> Option<[i64; N]> {
    fork_probe(|out| {
        // SAFETY: plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return 2;
        }
        if let Some(prog) = prog {
            if install(prog).is_err() {
                return 3;
            }
        }
        probe(out);
        0
    })
}

fn in_child<const N: usize>(
    prog: Option<&BpfProgram>,
    probe: impl FnOnce(&mut [i64; N]),
) -> [i64; N] {
    try_in_child(prog, probe).expect("child killed by a signal")
}

/// getpid through the i386 ABI (`int 0x80`, syscall 20), from a 64-bit process.
#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> i64 {
    let ret: i32;
    // SAFETY: i386 getpid takes no arguments and touches no memory; the compat entry may
    // clobber r8-r11, declared as such.
    unsafe {
        core::arch::asm!(
            "int 0x80",
            inlateout("eax") 20i32 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        );
    }
    i64::from(ret)
}

/// A one-instruction "allow everything" program, for probing `seccomp(2)` itself.
static ALLOW_ALL: [libc::sock_filter; 1] = [libc::sock_filter {
    code: 0x06,
    jt: 0,
    jf: 0,
    k: libc::SECCOMP_RET_ALLOW,
}];

#[test]
fn installed_filter_denies_what_it_should() {
    let prog = build(&default_opts()).unwrap();
    let missing = c"/nonexistent-warden-seccomp-test";
    let tmpfs = c"tmpfs";
    let devnull = c"/dev/null";
    let got = in_child::<25>(Some(&prog), |out| {
        // SAFETY: raw system calls on descriptors and buffers owned by this child; the ones
        // that would have effects if the filter let them through are harmless here (they fail
        // for other reasons, or only affect this short-lived child).
        unsafe {
            let mut pipe = [0; 2];
            libc::pipe(pipe.as_mut_ptr());
            let byte: libc::c_char = b'x' as libc::c_char;
            let mut n: libc::c_int = 0;
            out[0] = res(libc::ioctl(pipe[0], libc::TIOCSTI, &byte).into());
            out[1] = res(libc::syscall(
                libc::SYS_ioctl,
                pipe[0],
                u64::from(libc::TIOCSTI as u32) | 1 << 32,
                &byte,
            ));
            out[2] = res(libc::ioctl(pipe[0], libc::TIOCLINUX, &byte).into());
            out[3] = res(libc::ioctl(pipe[0], libc::FIONREAD, &mut n).into());
            out[4] = res(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0));
            out[5] = fd_res(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0));
            out[6] = res(libc::syscall(
                libc::SYS_socket,
                u64::from(libc::AF_UNIX as u32) | 1 << 32,
                libc::SOCK_STREAM,
                0,
            ));
            out[7] = fd_res(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0));
            let mut pair = [0; 2];
            out[8] = res(
                libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()).into(),
            );
            out[9] = fd_res(libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW,
                libc::NETLINK_ROUTE,
            ));
            out[10] = fd_res(libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW,
                libc::NETLINK_AUDIT,
            ));
            out[11] = fd_res(libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0));
            out[12] = fd_res(libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0));
            // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
            out[13] = res(libc::syscall(libc::SYS_keyctl, 0, -3, 0));
            out[14] = res(libc::syscall(libc::SYS_io_uring_setup, 1, 0));
            out[15] = res(libc::unshare(libc::CLONE_NEWUSER).into());
            out[16] = res(libc::mount(
                tmpfs.as_ptr(),
                missing.as_ptr(),
                tmpfs.as_ptr(),
                0,
                std::ptr::null(),
            )
            .into());
            out[17] = res(libc::syscall(0x4000_0000 + libc::SYS_getpid));
            out[18] = res(libc::syscall(libc::SYS_getpid));
            let fd = libc::open(devnull.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            out[19] = res(libc::write(fd, (&byte as *const libc::c_char).cast(), 1) as i64);
            out[20] = res(libc::syscall(
                libc::SYS_clone,
                libc::CLONE_NEWUSER | libc::SIGCHLD,
                0,
                0,
                0,
                0,
            ));
            if out[20] == 0 {
                libc::_exit(0);
            }
            out[21] = res(libc::syscall(libc::SYS_clone3, 0, 0));
            // A plain fork through clone(SIGCHLD) still works.
            let child = libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0);
            if child == 0 {
                libc::_exit(7);
            }
            let mut status = 0;
            out[22] = if child > 0 && libc::waitpid(child as libc::pid_t, &mut status, 0) > 0 {
                i64::from(libc::WEXITSTATUS(status))
            } else {
                -errno()
            };
            let mut fprog = libc::sock_fprog {
                len: 1,
                filter: ALLOW_ALL.as_ptr().cast_mut(),
            };
            out[23] = res(libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &mut fprog,
            ));
            out[24] = res(libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &mut fprog,
            ));
        }
    });
    let expect: [(&str, i64); 25] = [
        ("ioctl(TIOCSTI)", -EPERM),
        ("ioctl(TIOCSTI | 1 << 32)", -EPERM),
        ("ioctl(TIOCLINUX)", -EPERM),
        ("ioctl(FIONREAD)", 0),
        ("ptrace(PTRACE_TRACEME)", -EPERM),
        ("socket(AF_UNIX)", -EPERM),
        ("socket(AF_UNIX | 1 << 32)", -EPERM),
        ("socket(AF_INET)", 0),
        ("socketpair(AF_UNIX)", 0),
        ("socket(AF_NETLINK, NETLINK_ROUTE)", 0),
        ("socket(AF_NETLINK, NETLINK_AUDIT)", -EPERM),
        ("socket(AF_PACKET)", -EPERM),
        ("socket(AF_VSOCK)", -EPERM),
        ("keyctl", -EPERM),
        ("io_uring_setup", -EPERM),
        ("unshare(CLONE_NEWUSER)", -EPERM),
        ("mount", -EPERM),
        ("x32 getpid", -EPERM),
        ("getpid (checked below)", got[18]),
        ("write(/dev/null)", 1),
        ("clone(CLONE_NEWUSER)", -EPERM),
        ("clone3", -ENOSYS),
        ("fork via clone(SIGCHLD), child's exit code", 7),
        ("seccomp(NEW_LISTENER)", -EPERM),
        ("seccomp(SET_MODE_FILTER) stacking", 0),
    ];
    for (i, (what, want)) in expect.iter().enumerate() {
        assert_eq!(got[i], *want, "{what}");
    }
    assert!(got[18] > 0, "getpid");
}

#[test]
fn installed_filter_options_allow_unix_sockets_and_namespaces() {
    let prog = build(&permissive_opts()).unwrap();
    let got = in_child::<4>(Some(&prog), |out| {
        // SAFETY: raw system calls; unshare only affects this short-lived child.
        unsafe {
            out[0] = fd_res(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0));
            out[1] = res(libc::unshare(libc::CLONE_NEWUSER).into());
            // clone3 reaches the kernel, which rejects the null argument.
            out[2] = res(libc::syscall(libc::SYS_clone3, 0, 0));
            out[3] = fd_res(libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0));
        }
    });
    assert_eq!(got[0], 0, "socket(AF_UNIX)");
    assert_eq!(got[1], 0, "unshare(CLONE_NEWUSER)");
    assert_ne!(got[2], -ENOSYS, "clone3");
    assert_ne!(got[2], -EPERM, "clone3");
    assert_eq!(got[3], -EPERM, "socket(AF_PACKET)");
}

#[cfg(target_arch = "x86_64")]
#[test]
fn installed_filter_refuses_the_i386_abi() {
    // Without a filter: is the i386 ABI there at all (ia32_emulation may be off)?
    let Some(baseline) = try_in_child::<1>(None, |out| out[0] = int80_getpid()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but int 0x80 is not available on this kernel"
        );
        eprintln!("skipped: int 0x80 is not available on this kernel");
        return;
    };
    assert!(
        baseline[0] > 0,
        "i386 getpid without filter: {}",
        baseline[0]
    );

    let prog = build(&default_opts()).unwrap();
    let got = in_child::<1>(Some(&prog), |out| out[0] = int80_getpid());
    assert_eq!(got[0], -EPERM, "i386 getpid under the filter");
}

#[test]
fn install_refuses_empty_and_oversized_programs() {
    assert!(matches!(install(&Vec::new()), Err(SeccompError::Empty)));
    let huge = vec![stmt(BPF_RET_K, ALLOW); MAX_INSTRUCTIONS + 1];
    assert!(matches!(install(&huge), Err(SeccompError::TooLarge(_))));
}

#[test]
fn the_dispatch_tree_changes_no_verdict_and_shortens_the_path_of_allowed_calls() {
    for opts in every_option_set() {
        let linear = build_linear(&opts).unwrap();
        let ruled: Vec<u32> = rules(&opts).unwrap().keys().map(|n| *n as u32).collect();
        let tree = build(&opts).unwrap();
        // Outright denials moved from seccompiler's chain into the tree: a shorter program.
        assert!(
            tree.len() < linear.len(),
            "{} instructions with the tree, {} without",
            tree.len(),
            linear.len()
        );
        let arg_sets = [
            a(&[]),
            a(&[u(libc::AF_UNIX), 1, 0]),
            a(&[u(libc::AF_NETLINK), 3, 9]),
            a(&[0, libc::TIOCSTI]),
            a(&[(libc::CLONE_NEWUSER as u64) | 17]),
            a(&[u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX]),
            a(&[1, 1 << 32, 0xffff_ffff]),
        ];
        let mut nrs: Vec<i64> = (0..1100).collect();
        nrs.extend([0x3fff_ffff, 0x4000_0000, 0x4000_0001, i64::from(u32::MAX)]);
        for nr in nrs {
            for args in arg_sets {
                for arch in [AUDIT_ARCH_X86_64, 0x4000_0003] {
                    assert_eq!(
                        eval(&tree, arch, nr, args),
                        eval(&linear, arch, nr, args),
                        "nr {nr} arch {arch:#x} args {args:?}"
                    );
                }
            }
        }
        // An allowed call now decides in a handful of comparisons.
        let steps = |prog: &[sock_filter], nr: i64| count_steps(prog, nr);
        let unruled = (0..450).find(|n| !ruled.contains(&(*n as u32))).unwrap();
        assert!(steps(&tree, unruled) <= 16, "{}", steps(&tree, unruled));
        assert!(steps(&linear, 0) > 2 * steps(&tree, 0));
    }
}

#[test]
fn the_dispatch_tree_covers_edges() {
    // Runs of one kind, neighbours of different kinds, 0 and the top of the range; every
    // number lands where its leaf says, the rest is allowed.
    let body = |v: Vec<u32>| v.into_iter().map(|n| (n, Leaf::Body)).collect::<Vec<_>>();
    let cases: Vec<Vec<(u32, Leaf)>> = vec![
        body(vec![0]),
        body(vec![0, 1, 2, 7, 9, 10]),
        body(vec![5, u32::MAX]),
        body(vec![3, 4, 5]),
        body((0..60).map(|n| n * 3).collect()),
        vec![
            (0, Leaf::Deny),
            (1, Leaf::Body),
            (2, Leaf::Deny),
            (3, Leaf::Deny),
        ],
        vec![
            (7, Leaf::Deny),
            (8, Leaf::Body),
            (20, Leaf::Body),
            (u32::MAX, Leaf::Deny),
        ],
        (0..90)
            .map(|n| (n * 2, if n % 3 == 0 { Leaf::Body } else { Leaf::Deny }))
            .collect(),
    ];
    for leaves in cases {
        let mut tree = dispatch_tree(&leaves).unwrap();
        // The body: one distinct verdict, so "went to the body" is visible.
        tree.push(stmt(BPF_RET_K, 0xdead));
        let mut prog = vec![stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR)];
        prog.extend(tree);
        let mut probe: Vec<u32> = (0..700).collect();
        probe.extend([u32::MAX - 1, u32::MAX]);
        for nr in probe {
            let want = match leaves.iter().find(|(n, _)| *n == nr) {
                Some((_, Leaf::Body)) => 0xdead,
                Some((_, Leaf::Deny)) => DENY,
                None => ALLOW,
            };
            assert_eq!(
                eval(&prog, 0, i64::from(nr), a(&[])),
                want,
                "{nr} in {leaves:?}"
            );
        }
    }
    assert!(dispatch_tree(&[]).is_none());
    // Too many runs for 8-bit jumps: no tree (the linear body stays correct).
    let many: Vec<(u32, Leaf)> = (0..2000).map(|n| (n * 2, Leaf::Body)).collect();
    assert!(dispatch_tree(&many).is_none());
}

/// Instructions executed for a native call without arguments.
fn count_steps(prog: &[sock_filter], nr: i64) -> usize {
    let mut n = 0;
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        n += 1;
        let ins = &prog[pc];
        let step = |cond: bool| 1 + usize::from(if cond { ins.jt } else { ins.jf });
        pc += match ins.code {
            0x20 => {
                acc = if ins.k == 0 {
                    nr as u32
                } else if ins.k == 4 {
                    AUDIT_ARCH_X86_64
                } else {
                    0
                };
                1
            }
            0x54 => {
                acc &= ins.k;
                1
            }
            0x05 => 1 + ins.k as usize,
            0x15 => step(acc == ins.k),
            0x25 => step(acc > ins.k),
            0x35 => step(acc >= ins.k),
            0x06 => return n,
            code => panic!("unexpected opcode {code:#x}"),
        };
    }
}
