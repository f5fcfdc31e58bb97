/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record warden's eBPF programs send through the ring buffer, and the numbers inside it.
 * The Rust side decodes it byte by byte (runtime/src/audit/record.rs, `RawEvent::decode`):
 * every offset here is asserted there, so change both together and bump EVENT_VERSION.
 */
#ifndef WARDEN_BPF_H
#define WARDEN_BPF_H

#define EVENT_VERSION 1
#define PATH_LEN 512
#define COMM_LEN 16

/* event.kind */
#define EV_FILE 1    /* a file syscall failed (or opened a denyRead mask) */
#define EV_EXEC 2    /* sched_process_exec: path = filename, path2 = argv head */
#define EV_CONNECT 3 /* connect() on AF_INET/AF_INET6, address from cgroup/connect4/6 */
#define EV_UNIX 4    /* connect() on AF_UNIX, path from cgroup/connect_unix */
#define EV_SYSCALL 5 /* a call refused at entry (seccomp): flags = its number, family = arg 0 */
/* From the BPF LSM programs (warden_lsm.bpf.c), only for what no tracepoint entry covers: */
#define EV_PTRACE 6   /* ptrace_access_check across the sandbox boundary: pid = tracer, flags = tracee pid, family = mode */
#define EV_SOCKET 7   /* socket_connect in a family the cgroup programs do not see: family */
#define EV_LSM_FILE 8 /* a file rule matched with no syscall entry (exec, io_uring, fd passing): op, path */

/* event.op: the system call (EV_FILE, EV_CONNECT, EV_UNIX) */
#define OP_OPENAT 1
#define OP_OPENAT2 2
#define OP_CREAT 3
#define OP_OPEN 4
#define OP_UNLINKAT 5
#define OP_UNLINK 6
#define OP_RENAMEAT2 7
#define OP_RENAMEAT 8
#define OP_RENAME 9
#define OP_LINKAT 10
#define OP_LINK 11
#define OP_SYMLINKAT 12
#define OP_SYMLINK 13
#define OP_MKDIRAT 14
#define OP_MKDIR 15
#define OP_RMDIR 16
#define OP_FCHMODAT 17
#define OP_FCHMODAT2 18
#define OP_CHMOD 19
#define OP_FCHOWNAT 20
#define OP_CHOWN 21
#define OP_LCHOWN 22
#define OP_TRUNCATE 23
#define OP_UTIMENSAT 24
#define OP_SETXATTR 25
#define OP_LSETXATTR 26
#define OP_MKNODAT 27
#define OP_MKNOD 28
/* Calls on a descriptor (no path: the target is the descriptor's file, named at exit), the
 * xattr removals, the older time calls, and exec (a refused execve names no other record). */
#define OP_FCHMOD 29
#define OP_FCHOWN 30
#define OP_FSETXATTR 31
#define OP_REMOVEXATTR 32
#define OP_LREMOVEXATTR 33
#define OP_FREMOVEXATTR 34
#define OP_FUTIMESAT 35
#define OP_UTIMES 36
#define OP_UTIME 37
#define OP_SETXATTRAT 38
#define OP_REMOVEXATTRAT 39
#define OP_BIND 49 /* bind of a unix socket to a path: creates a file */
#define OP_IOCTL 50 /* an ioctl on a descriptor refused EROFS/EACCES (flags: the request) */
#define OP_EXECVE 47
#define OP_EXECVEAT 48
#define OP_CONNECT 40
#define OP_SENDMSG 46  /* sendmsg_unix: a datagram sent to a unix socket path */
#define OP_SOCKET 41
#define OP_EXEC 42    /* bprm_check_security */
#define OP_PTRACE 43  /* ptrace_access_check */
#define OP_READ 44    /* file_permission: read(2) through a descriptor */
#define OP_WRITE 45   /* file_permission: write(2) through a descriptor */

/* event.flags bits beyond the open flags (bits 32..63) */
#define FL_MASKED (1ULL << 32)    /* the open succeeded on the /dev/null a denyRead mask binds */
#define FL_RELATIVE (1ULL << 33)  /* the path was relative to a directory descriptor other than the cwd */
#define FL_PATH_LATE (1ULL << 34) /* the path could not be read at entry; read at exit instead */
#define FL_TRUNCATED (1ULL << 35) /* the path filled PATH_LEN */
#define FL_UNIX_DENIED (1ULL << 36) /* connect_unix refused: the path is not in allowUnixSockets */
#define FL_LSM (1ULL << 38)        /* a BPF LSM rule of the sandbox matched this operation */
#define FL_LSM_DENIED (1ULL << 39) /* ... and the LSM refused it (warden.audit.enforce) */
#define FL_CWD (1ULL << 37) /* a relative path: path2 holds the caller's working directory as
                             * `port` NUL-terminated names, innermost first (read at exit) */
#define FL_RACED (1ULL << 40) /* during the call another thread changed what the record's path
                               * was built from: the path's bytes in the caller's memory, the
                               * shared working directory or the shared descriptor table */

/* Key of unix_allow: a watched cgroup and a socket path, NUL-padded. */
#define UNIX_KEY_LEN 128
struct unix_key {
	__u64 cgroup_id;
	char path[UNIX_KEY_LEN];
};

/* The BPF LSM programs (warden_lsm.bpf.c): a sandbox's mode (map lsm_cgroups, by cgroup id)
 * and the classes of the inodes its rules name (map lsm_inodes: bits, nearest ancestor wins). */
#define LSM_OBSERVE 1 /* record what enforce mode would refuse, refuse nothing */
#define LSM_ENFORCE 2 /* refuse it (EACCES; EPERM for ptrace) and record */
#define LSM_INO_WRITABLE 1   /* a writable root (allowWrite, the private TMPDIR) */
#define LSM_INO_PROTECTED 2  /* read-only again inside a writable root (denyWrite, mandatory) */
#define LSM_INO_DENY_READ 4  /* denyRead */
#define LSM_INO_ALLOW_READ 8 /* allowRead inside a denyRead directory */
struct lsm_inode_key {
	__u64 cgroup_id;
	__u64 ino;
	__u32 dev; /* the kernel's dev_t of the inode's superblock: MKDEV(major, minor) */
	__u32 pad;
};

/* The drop counters (per-CPU array `drops`) */
#define DROP_RINGBUF 0 /* bpf_ringbuf_reserve failed: the reader is behind */
#define DROP_PENDING 1 /* the per-thread entry map was full: a syscall went unobserved */
#define DROP_LIMITED 2 /* a sandbox over its share of a shared ring buffer (struct rate) */
#define DROP_SLOTS 3

/* `rates` values (ebpf/emit.bpf.h): a sandbox's share of the node daemon's ring buffer. The
 * Rust side reads and writes them as five u64 (runtime/src/audit/bpf.rs, `Rate`). */
#define RATE_WINDOW_NS 100000000ULL /* 100 ms */
struct rate {
	__u64 window_ns; /*  0: start of the current window (bpf_ktime_get_ns) */
	__u64 sent;      /*  8: events sent in the window */
	__u64 share;     /* 16: events per window sent whatever the ring buffer holds */
	__u64 limited;   /* 24: events not sent: over the share, the ring buffer half full */
	__u64 ring_full; /* 32: events of this sandbox the full ring buffer refused */
};

struct event {
	__u64 ts_ns;     /*   0: bpf_ktime_get_boot_ns() */
	__u64 cgroup_id; /*   8: the watched cgroup (the ancestor at the watched level) */
	__u32 pid;       /*  16: tgid */
	__u32 tid;       /*  20 */
	__u32 ppid;      /*  24: real parent's tgid */
	__u32 uid;       /*  28 */
	__u16 kind;      /*  32: EV_* */
	__u16 op;        /*  34: OP_* */
	__s32 ret;       /*  36: the syscall's result (negative errno), 0 when unknown */
	__u64 flags;     /*  40: open flags (low 32 bits) and FL_* */
	__u16 family;    /*  48: AF_INET, AF_INET6, AF_UNIX, or socket()'s family */
	__u16 port;      /*  50: host byte order */
	__u32 version;   /*  52: EVENT_VERSION */
	__u8 addr[16];   /*  56: IPv4 in the first 4 bytes, or IPv6 */
	char comm[COMM_LEN];  /*  72 */
	char path[PATH_LEN];  /*  88 */
	char path2[PATH_LEN]; /* 600: rename/link target, symlink content, exec argv head */
};                        /* 1112 */

/* What a thread's current syscall is about, from entry (tp_btf/sys_enter, or a cgroup
 * connect hook) to exit (tp_btf/sys_exit): the map `pending_calls`, keyed by thread id. The
 * BPF LSM programs share the map (libbpf reuses its descriptor) and mark the entry of the call
 * they judge (FL_LSM, FL_LSM_DENIED), so one record comes out per operation. */
struct pending {
	struct event ev;
	/* Room for a name read at the end of ev.path2 (the working-directory walk reads up to
	 * NAME_MAX + 1 bytes at any offset of path2, then checks that the name fit). */
	char name_slack[256];
	__u64 upath;  /* user pointers, read again at exit when entry could not read them */
	__u64 upath2;
	__s64 nr;     /* the system call it belongs to */
	__u64 wflags; /* the watched cgroup's W_* flags */
	__s64 dfd;    /* the directory (or file) descriptor argument; AT_FDCWD when none */
	/* What another thread could change under the call (FL_RACED), seen at entry: */
	__u64 fs;       /* the working directory's fs_struct when another task shares it, else 0 */
	__u64 fs_seq;   /* ... and its sequence count (odd while a chdir is writing it) */
	__u64 files;    /* the descriptor table when another task shares it, else 0 */
	__u64 fd_started;  /* ... and its fd_changes counters */
	__u64 fd_finished;
};

/* `fd_changes` values: calls that can replace an open descriptor (close, dup2, dup3,
 * close_range) of a descriptor table shared between tasks, started and finished. A call on a
 * descriptor saw the same file at its start and its end when both stayed equal to each
 * other and unchanged meanwhile. */
struct fd_changes {
	__u64 started;
	__u64 finished;
};

/* Values of the `watched` map (a cgroup id's flags). */
#define W_WATCHED 1
/* The sandbox's view masks no file with /dev/null: successful opens need no look at the
 * descriptor (the daemon, which does not know the view, never sets it). */
#define W_NO_MASKED_FILES 2
/* The view has a denyRead directory with allowRead paths inside (its root is searchable, so
 * other names in it answer ENOENT rather than EACCES): file calls failing with ENOENT are
 * reported too, and userspace keeps those that a mask hid. */
#define W_MASK_ENOENT 4

#endif
