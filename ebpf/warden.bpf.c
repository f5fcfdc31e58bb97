// SPDX-License-Identifier: Apache-2.0
/*
 * warden's kernel-truth audit programs (issue #5). See ebpf/README.md.
 *
 * Scope: everything is keyed on the sandbox's cgroup v2 leaf. The tracepoints are global;
 * each one (after a switch on the syscall number) first asks whether the current task's ancestor at the watched level (watch_config[0])
 * is a watched cgroup id, so a process outside every sandbox costs one array lookup, one
 * helper call and one hash lookup, and produces nothing. The cgroup programs are attached to
 * the sandbox's cgroup directory itself.
 *
 * Records: failed file syscalls (EACCES, EPERM, EROFS) with the path captured at entry
 * (tp_btf/sys_enter) and matched at exit (tp_btf/sys_exit), opens that land on a denyRead
 * mask (/dev/null bound over a file), exec of each binary (sched_process_exec), connect()
 * attempts with the address the kernel copied (cgroup/connect4, connect6, connect_unix) and
 * their result, and calls refused at entry (seccomp's EPERM: no sys_enter, only sys_exit).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "warden.bpf.h"

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((void *)(ptr) - bpf_core_field_offset(type, member)))
#endif

char LICENSE[] SEC("license") = "GPL";

#define EPERM 1
#define ENOENT 2
#define EACCES 13
#define ENOSYS 38
#define EROFS 30
#define EXDEV 18
#define AT_FDCWD -100
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define S_IFMT 00170000
#define S_IFCHR 0020000
/* The kernel's internal dev_t of /dev/null: MKDEV(1, 3) with MINORBITS 20. */
#define DEV_NULL ((1U << 20) | 3)
#define SUN_PATH_LEN 108

/* The cgroup ids of live sandboxes (value unused). Filled by the supervisor before the
 * sandbox's pid 1 gets its go byte. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

/* allowUnixSockets enforcement: cgroups in unix_enforce may connect only to the paths that
 * unix_allow lists for them (exact bytes up to the first NUL; abstract names never match). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} unix_enforce SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct unix_key);
	__type(value, __u8);
} unix_allow SEC(".maps");

/* Scratch for building a unix_key (too large for the stack with the rest). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unix_key);
} unix_scratch SEC(".maps");

/* watch_config[0]: the cgroup v2 level of the watched cgroups (0 = nothing watched yet). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} watch_config SEC(".maps");

/*
 * A watched thread's current file syscall, from entry to exit (struct pending: warden.bpf.h):
 * task-local storage, so the slot is the task's own — allocated on its first recorded call,
 * reused by every later one, freed with the task — and found without hashing. (A hash entry
 * inserted and deleted per call cost about 1 µs per open: docs/benchmarks.md.) `nr` is -1
 * between calls.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending_files SEC(".maps");

/* A path read again at a call's exit, to compare with the copy made at its entry. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[PATH_LEN]);
} reread SEC(".maps");

/* Changes to descriptor tables shared between tasks (struct fd_changes), keyed by the
 * files_struct's address; only watched tasks count. An entry evicted while a call was in
 * flight makes that call's record FL_RACED (its counters no longer match), never clean. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct fd_changes);
} fd_changes SEC(".maps");

/* A thread's current connect (the cgroup hooks), from the hook to the syscall's exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pending);
} pending_calls SEC(".maps");

/* One pending record under construction per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pending);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 * 1024 * 1024);
} events SEC(".maps");

/* Loss is never silent: DROP_* slots, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

#include "emit.bpf.h"

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
/* A kernel pointer read as a plain value, made a read-only BTF pointer again (Linux 6.2+). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* x86_64 system call numbers of the calls recorded at entry (build.rs defines the target
 * architecture; other architectures are not supported yet). */
#if defined(__TARGET_ARCH_x86)
#define NR_open 2
#define NR_close 3
#define NR_dup2 33
#define NR_dup3 292
#define NR_close_range 436
#define NR_socket 41
#define NR_connect 42
#define NR_sendto 44
#define NR_sendmsg 46
#define NR_sendmmsg 307
#define NR_io_uring_enter 426
#define NR_truncate 76
#define NR_rename 82
#define NR_mkdir 83
#define NR_rmdir 84
#define NR_creat 85
#define NR_link 86
#define NR_unlink 87
#define NR_symlink 88
#define NR_chmod 90
#define NR_chown 92
#define NR_lchown 94
#define NR_mknod 133
#define NR_setxattr 188
#define NR_lsetxattr 189
#define NR_openat 257
/* A pending record's `nr` for a datagram send: sendto, sendmsg and sendmmsg all reach the
 * sendmsg_unix hook, which cannot tell them apart. */
#define NR_ANY_SEND -2
/* ... and for a connect hook: connect, or a send with TCP fast open, or io_uring_enter. */
#define NR_ANY_CONNECT -3
#define NR_mkdirat 258
#define NR_mknodat 259
#define NR_fchownat 260
#define NR_unlinkat 263
#define NR_renameat 264
#define NR_linkat 265
#define NR_symlinkat 266
#define NR_fchmodat 268
#define NR_utimensat 280
#define NR_renameat2 316
#define NR_openat2 437
#define NR_fchmodat2 452
#define NR_fchmod 91
#define NR_fchown 93
#define NR_fsetxattr 190
#define NR_removexattr 197
#define NR_lremovexattr 198
#define NR_fremovexattr 199
#define NR_futimesat 261
#define NR_utimes 235
#define NR_utime 132
#define NR_setxattrat 463
#define NR_removexattrat 466
#define NR_bind 49
#define NR_ioctl 16
#define NR_setpriority 141
#define NR_process_madvise 440
#define NR_clone3 435
#define NR_execve 59
#define NR_execveat 322
/* The kernel dispatches on the low 32 bits of the number (do_syscall_64 takes an int; so
 * does seccomp's view), while orig_ax keeps all 64: a number with high bits set ran as its
 * low half and was taken for no known call here (red-team round 21). */
#define SYSCALL_NR(regs) ((long)(int)(regs)->orig_ax)
#else
#error "warden's audit programs support x86_64 only so far"
#endif

/* A file syscall's arguments: which hold the path, the second path, the open flags and the
 * directory descriptor (-1: none). */
struct file_args {
	__u16 op;
	__s8 path, path2, flags, dfd;
};

static __always_inline bool file_syscall(long nr, struct file_args *a)
{
	/*                                            op             path path2 flags dfd */
#define F(name, o, p, p2, fl, d)                                                            \
	case NR_##name:                                                                     \
		*a = (struct file_args){ o, p, p2, fl, d };                                 \
		return true;
	switch (nr) {
	F(openat,    OP_OPENAT,    1, -1,  2,  0)
	F(openat2,   OP_OPENAT2,   1, -1, -1,  0)
	F(creat,     OP_CREAT,     0, -1, -1, -1)
	F(open,      OP_OPEN,      0, -1,  1, -1)
	F(unlinkat,  OP_UNLINKAT,  1, -1, -1,  0)
	F(unlink,    OP_UNLINK,    0, -1, -1, -1)
	F(renameat2, OP_RENAMEAT2, 1,  3, -1,  0)
	F(renameat,  OP_RENAMEAT,  1,  3, -1,  0)
	F(rename,    OP_RENAME,    0,  1, -1, -1)
	F(linkat,    OP_LINKAT,    3,  1, -1,  2)
	F(link,      OP_LINK,      1,  0, -1, -1)
	F(symlinkat, OP_SYMLINKAT, 2,  0, -1,  1)
	F(symlink,   OP_SYMLINK,   1,  0, -1, -1)
	F(mkdirat,   OP_MKDIRAT,   1, -1, -1,  0)
	F(mkdir,     OP_MKDIR,     0, -1, -1, -1)
	F(rmdir,     OP_RMDIR,     0, -1, -1, -1)
	F(fchmodat,  OP_FCHMODAT,  1, -1, -1,  0)
	F(fchmodat2, OP_FCHMODAT2, 1, -1, -1,  0)
	F(chmod,     OP_CHMOD,     0, -1, -1, -1)
	F(fchownat,  OP_FCHOWNAT,  1, -1, -1,  0)
	F(chown,     OP_CHOWN,     0, -1, -1, -1)
	F(lchown,    OP_LCHOWN,    0, -1, -1, -1)
	F(truncate,  OP_TRUNCATE,  0, -1, -1, -1)
	F(utimensat, OP_UTIMENSAT, 1, -1, -1,  0)
	F(setxattr,  OP_SETXATTR,  0, -1, -1, -1)
	F(lsetxattr, OP_LSETXATTR, 0, -1, -1, -1)
	F(mknodat,   OP_MKNODAT,   1, -1, -1,  0)
	F(mknod,     OP_MKNOD,     0, -1, -1, -1)
	F(fchmod,    OP_FCHMOD,   -1, -1, -1,  0)
	F(fchown,    OP_FCHOWN,   -1, -1, -1,  0)
	F(fsetxattr, OP_FSETXATTR, -1, -1, -1, 0)
	F(removexattr,  OP_REMOVEXATTR,  0, -1, -1, -1)
	F(lremovexattr, OP_LREMOVEXATTR, 0, -1, -1, -1)
	F(fremovexattr, OP_FREMOVEXATTR, -1, -1, -1, 0)
	F(futimesat, OP_FUTIMESAT, 1, -1, -1,  0)
	F(utimes,    OP_UTIMES,    0, -1, -1, -1)
	F(utime,     OP_UTIME,     0, -1, -1, -1)
	F(setxattrat,    OP_SETXATTRAT,    1, -1, -1, 0)
	F(removexattrat, OP_REMOVEXATTRAT, 1, -1, -1, 0)
	F(bind,      OP_BIND,      1, -1, -1, -1)
	F(execve,    OP_EXECVE,    0, -1, -1, -1)
	F(execveat,  OP_EXECVEAT,  1, -1, -1,  0)
	default:
		return false;
	}
#undef F
}

/* The syscall's argument `i` from the user registers saved at entry. `regs` comes typed from
 * the tp_btf tracepoints, so these are plain loads (the verifier guards them), not helper
 * calls: a bpf_probe_read per argument cost ~25 ns, and sys_exit read the call's number on
 * every system call of every process. */
static __always_inline unsigned long arg(struct pt_regs *regs, int i)
{
	switch (i) {
	case 0: return PT_REGS_PARM1_SYSCALL(regs);
	case 1: return PT_REGS_PARM2_SYSCALL(regs);
	case 2: return PT_REGS_PARM3_SYSCALL(regs);
	case 3: return PT_REGS_PARM4_SYSCALL(regs);
	case 4: return PT_REGS_PARM5_SYSCALL(regs);
	default: return PT_REGS_PARM6_SYSCALL(regs);
	}
}

/* The watched cgroup the current task belongs to, or 0. */
/* The current task's watched cgroup id (0: not watched) and its W_* flags. */
static __always_inline __u64 watched_cgroup_flags(__u8 *wflags)
{
	__u32 zero = 0;
	__u32 *level = bpf_map_lookup_elem(&watch_config, &zero);
	if (!level || !*level)
		return 0;
	__u64 id = bpf_get_current_ancestor_cgroup_id(*level);
	if (!id)
		return 0;
	__u8 *v = bpf_map_lookup_elem(&watched, &id);
	if (!v)
		return 0;
	*wflags = *v;
	return id;
}

static __always_inline __u64 watched_cgroup(void)
{
	__u8 wflags = 0;
	return watched_cgroup_flags(&wflags);
}

static __always_inline void fill_task(struct event *e, __u64 cgroup_id)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cgroup_id;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->version = EVENT_VERSION;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* A fresh pending record for this thread, in the per-CPU scratch slot. */
static __always_inline struct pending *begin(__u64 cgroup_id, __u16 kind, __u16 op)
{
	__u32 zero = 0;
	struct pending *p = bpf_map_lookup_elem(&scratch, &zero);
	if (!p)
		return 0;
	fill_task(&p->ev, cgroup_id);
	p->ev.kind = kind;
	p->ev.op = op;
	p->ev.ret = 0;
	p->ev.flags = 0;
	p->ev.family = 0;
	p->ev.port = 0;
	__builtin_memset(p->ev.addr, 0, sizeof(p->ev.addr));
	p->ev.path[0] = 0;
	p->ev.path2[0] = 0;
	p->upath = 0;
	p->upath2 = 0;
	p->nr = -1;
	return p;
}

static __always_inline void commit(struct pending *p)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&pending_calls, &tid, p, BPF_ANY))
		count_drop(DROP_PENDING);
}

static __always_inline void read_path(char *dst, __u64 uptr, __u64 *flags)
{
	if (!uptr) {
		dst[0] = 0;
		return;
	}
	long n = bpf_probe_read_user_str(dst, PATH_LEN, (const void *)uptr);
	if (n < 0) {
		dst[0] = 0;
		*flags |= FL_PATH_LATE;
	} else if (n >= PATH_LEN) {
		*flags |= FL_TRUNCATED;
	}
}

/* fs_struct before Linux 6.16 (a spinlock and a seqcount_spinlock_t; now a seqlock_t). */
struct fs_struct___seqcount {
	seqcount_spinlock_t seq;
} __attribute__((preserve_access_index));

/* The sequence count of a working directory's fs_struct: chdir, fchdir, chroot and setns
 * (set_fs_pwd, set_fs_root) add two, and it is odd while they write. */
static __always_inline __u64 fs_sequence(struct fs_struct *fs)
{
	if (bpf_core_field_exists(fs->seq.seqcount.seqcount))
		return fs->seq.seqcount.seqcount.sequence;
	return ((struct fs_struct___seqcount *)fs)->seq.seqcount.sequence;
}

/*
 * What the record of a call names besides its path — the working directory, or the file of a
 * descriptor — is read at the call's exit, not when the kernel looked the path up. Only a task
 * sharing the caller's fs_struct (CLONE_FS) or descriptor table (CLONE_FILES) can change those
 * in between, so for a shared one the state is noted now and compared at exit (raced): the
 * fs_struct's sequence count, and the table's fd_changes counters. A task alone with its
 * fs_struct or table costs two loads each: plain loads through the task's BTF pointer (the
 * verifier makes them fault-safe), not bpf_probe_read_kernel calls, which doubled the
 * programs' cost on a stat-heavy workload (session 13: +8 % → +18 % wall time).
 */
static __always_inline void race_snapshot(struct pending *p)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fs_struct *fs = task->fs;
	p->fs = 0;
	p->files = 0;
	if (fs && fs->users > 1) {
		p->fs = (__u64)fs;
		p->fs_seq = fs_sequence(fs);
	}
	struct files_struct *files = task->files;
	if (files && files->count.counter > 1) {
		__u64 key = (__u64)files;
		struct fd_changes *c = bpf_map_lookup_elem(&fd_changes, &key);
		p->files = key;
		p->fd_started = c ? c->started : 0;
		p->fd_finished = c ? c->finished : 0;
	}
}

/* Whether the working directory (`cwd`) or the descriptor table (`fds`) the record's path is
 * built from may have changed during the call (see race_snapshot). */
static __always_inline bool raced(struct pending *p, bool cwd, bool fds)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (cwd && p->fs) {
		struct fs_struct *fs = task->fs;
		__u64 seq = fs ? fs_sequence(fs) : 0;
		if ((__u64)fs != p->fs || seq != p->fs_seq || (seq & 1))
			return true;
	}
	if (fds && p->files) {
		__u64 key = p->files;
		struct fd_changes *c = bpf_map_lookup_elem(&fd_changes, &key);
		__u64 started = c ? c->started : 0;
		__u64 finished = c ? c->finished : 0;
		/* A change started or finished since entry, or one still running (started before
		 * entry, or after it), may have swapped the descriptor under the call. */
		if (started != p->fd_started || finished != p->fd_finished || started != finished)
			return true;
	}
	return false;
}

/* Entry of a call that can replace an open descriptor (close, dup2, dup3, close_range) of a
 * descriptor table another task shares, in a watched sandbox: counted as started, and the
 * thread's pending slot notes it so the exit counts it as finished. */
static __always_inline void fd_change_enter(long nr)
{
	struct files_struct *files = bpf_get_current_task_btf()->files;
	if (!files || files->count.counter <= 1)
		return;
	if (!watched_cgroup())
		return;
	__u64 key = (__u64)files;
	struct fd_changes *c = bpf_map_lookup_elem(&fd_changes, &key);
	if (!c) {
		struct fd_changes zero = {};
		bpf_map_update_elem(&fd_changes, &key, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&fd_changes, &key);
		if (!c)
			return;
	}
	/* Counted first: a change whose exit cannot be noted (no pending slot) leaves the table
	 * "changing" for good, so its records are marked, never clean. */
	__sync_fetch_and_add(&c->started, 1);
	struct pending *p = bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0,
						 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p) {
		count_drop(DROP_PENDING);
		return;
	}
	p->ev.kind = 0; /* no file call: the BPF LSM programs leave it alone */
	p->files = key;
	p->nr = nr;
}

/* ... and its exit. */
static __always_inline void fd_change_exit(long nr)
{
	struct pending *p = bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0, 0);
	if (!p || p->nr != nr || p->ev.kind != 0)
		return;
	p->nr = -1;
	__u64 key = p->files;
	struct fd_changes *c = bpf_map_lookup_elem(&fd_changes, &key);
	if (c)
		__sync_fetch_and_add(&c->finished, 1);
}

/* Entry of a file syscall: the path (and second path) read now, the open flags. */
static __always_inline void file_enter(struct pt_regs *regs, long nr, struct file_args *a)
{
	__u8 wflags = 0;
	__u64 cg = watched_cgroup_flags(&wflags);
	if (!cg)
		return;
	struct pending *p = bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0,
						 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p) {
		count_drop(DROP_PENDING);
		return;
	}
	/* Who and when are filled at exit, and only for what is reported. */
	p->ev.cgroup_id = cg;
	p->ev.kind = EV_FILE;
	p->ev.op = a->op;
	p->ev.ret = 0;
	p->ev.family = 0;
	p->ev.port = 0;
	p->ev.path[0] = 0;
	p->ev.path2[0] = 0;
	p->upath = 0;
	p->upath2 = 0;
	p->dfd = a->dfd >= 0 ? (int)arg(regs, a->dfd) : AT_FDCWD;
	__u64 flags = 0;
	if (a->op == OP_OPENAT2) {
		__u64 how_flags = 0;
		bpf_probe_read_user(&how_flags, sizeof(how_flags), (const void *)arg(regs, 2));
		flags = how_flags & 0xffffffffULL;
	} else if (a->flags >= 0) {
		flags = arg(regs, a->flags) & 0xffffffffULL;
	}
	if (a->op == OP_BIND) {
		/* Only a unix socket bound to a path makes a file: the path follows sun_family. */
		__u16 family = 0;
		unsigned long sa = arg(regs, 1);
		char first = 0;
		if (bpf_probe_read_user(&family, sizeof(family), (const void *)sa) ||
		    family != AF_UNIX ||
		    bpf_probe_read_user(&first, 1, (const void *)(sa + 2)) || first == 0) {
			p->nr = -1;
			return;
		}
		p->upath = sa + 2;
		read_path(p->ev.path, p->upath, &flags);
	} else if (a->path >= 0) {
		p->upath = arg(regs, a->path);
		read_path(p->ev.path, p->upath, &flags);
		if (a->dfd >= 0 && (int)arg(regs, a->dfd) != AT_FDCWD && p->ev.path[0] != '/')
			flags |= FL_RELATIVE;
	}
	if (a->path2 >= 0) {
		p->upath2 = arg(regs, a->path2);
		read_path(p->ev.path2, p->upath2, &flags);
	}
	p->ev.flags = flags;
	p->wflags = wflags;
	race_snapshot(p);
	p->nr = nr;
}

static __always_inline bool is_dev_null_path(const char *path)
{
	const char want[] = "/dev/null";
	for (int i = 0; i < (int)sizeof(want); i++)
		if (path[i] != want[i])
			return false;
	return true;
}

/* Whether descriptor `fd` of the current task is the /dev/null character device. */
static __always_inline bool fd_is_dev_null(long fd)
{
	/* Every successful open passes here: plain loads through BTF pointers (fault-safe),
	 * one helper call for the table slot (a variable index), none for the rest. */
	struct files_struct *files = bpf_get_current_task_btf()->files;
	if (!files)
		return false;
	struct fdtable *fdt = files->fdt;
	if (!fdt)
		return false;
	struct file **fds = fdt->fd;
	unsigned int max = fdt->max_fds;
	if (!fds || fd < 0 || fd >= max)
		return false;
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return false;
	struct file *file = bpf_rdonly_cast(f, bpf_core_type_id_kernel(struct file));
	struct inode *inode = file->f_inode;
	if (!inode)
		return false;
	return (inode->i_mode & S_IFMT) == S_IFCHR && inode->i_rdev == DEV_NULL;
}

/* Longest working directory resolved in the kernel, in components; deeper ones are left to
 * userspace (/proc/PID/cwd while the process lives). */
#define CWD_DEPTH 32
/* Room each name is read into (NAME_MAX + 1). */
#define NAME_ROOM 256

/* One step up from a directory during the walk below. */
struct cwd_walk {
	struct dentry *d;
	struct vfsmount *vm;
	struct mount *m;
	struct dentry *root_d;
	struct vfsmount *root_m;
	__u32 off;
	__u16 n;
	__s16 done; /* 1: reached the root; -1: gave up */
};

static long cwd_step(__u32 i, void *arg)
{
	struct cwd_walk *w = arg;
	/* Plain locals: CO-RE relocations apply to kernel types, not to this walk's own. */
	struct dentry *d = w->d;
	struct vfsmount *vm = w->vm;
	struct mount *m = w->m;
	if (d == w->root_d && vm == w->root_m) {
		w->done = 1;
		return 1;
	}
	struct dentry *mnt_root = BPF_CORE_READ(vm, mnt_root);
	if (d == mnt_root) {
		/* The root of a mount: continue from where it is mounted. */
		struct mount *parent = BPF_CORE_READ(m, mnt_parent);
		if (parent == m) {
			w->done = 1;
			return 1;
		}
		w->d = BPF_CORE_READ(m, mnt_mountpoint);
		w->m = parent;
		w->vm = &parent->mnt;
		return 0;
	}
	struct dentry *up = BPF_CORE_READ(d, d_parent);
	if (up == d) {
		w->done = 1;
		return 1;
	}
	/* The names go into the pending record's second path (free for one-path calls). */
	struct pending *p = bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0, 0);
	__u32 off = w->off;
	if (!p || off >= PATH_LEN - 1) {
		w->done = -1;
		return 1;
	}
	/* Any offset of path2: a name that runs past its end lands in name_slack and the walk
	 * gives up below (it used to give up once 256 bytes were used, leaving deep directories
	 * to userspace's racy look at /proc; red-team round 18). */
	off &= PATH_LEN - 1;
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	long len = bpf_probe_read_kernel_str(p->ev.path2 + off, NAME_ROOM, name);
	if (len <= 1 || off + (__u32)len > PATH_LEN) {
		w->done = -1;
		return 1;
	}
	w->off = off + (__u32)len;
	w->n++;
	w->d = up;
	return 0;
}

/*
 * The caller's working directory, for a failed call on a relative path: its names from the
 * innermost up to the task's root (the sandbox's, after pivot_root), crossing mount points,
 * NUL-terminated one after the other in the pending record's path2; their number in
 * `*count`. Read in the kernel because the process may be gone by the time userspace sees
 * the record. One bpf_loop step per name keeps the verifier's work per step, not per path.
 * Returns false when the walk did not reach the root (too deep, or the names did not fit).
 */
/* The same for the file descriptor `fd` names (a directory for a path relative to it, the
 * file itself for a call on a descriptor), or, for AT_FDCWD, the working directory. */
static __always_inline bool dir_names(int fd, __u16 *count)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	if (!fs)
		return false;
	struct cwd_walk w = {};
	if (fd == AT_FDCWD) {
		w.d = BPF_CORE_READ(fs, pwd.dentry);
		w.vm = BPF_CORE_READ(fs, pwd.mnt);
	} else {
		struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
		if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
			return false;
		struct file **fds = BPF_CORE_READ(fdt, fd);
		struct file *f = 0;
		if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
			return false;
		w.d = BPF_CORE_READ(f, f_path.dentry);
		w.vm = BPF_CORE_READ(f, f_path.mnt);
	}
	w.root_d = BPF_CORE_READ(fs, root.dentry);
	w.root_m = BPF_CORE_READ(fs, root.mnt);
	w.m = container_of(w.vm, struct mount, mnt);
	bpf_loop(CWD_DEPTH, cwd_step, &w, 0);
	if (w.done != 1)
		return false;
	*count = w.n;
	return true;
}

static __always_inline bool cwd_names(__u16 *count)
{
	return dir_names(AT_FDCWD, count);
}

struct path_cmp {
	const char *a;
	const char *b;
	__u32 len;
	bool differ;
};

static long path_cmp_step(__u32 i, void *arg)
{
	struct path_cmp *c = arg;
	if (i >= c->len)
		return 1;
	i &= PATH_LEN - 1;
	if (c->a[i] != c->b[i]) {
		c->differ = true;
		return 1;
	}
	return 0;
}

/* Whether the path at `uptr` in the caller's memory now differs from `copy`, read from there
 * at the call's entry: another thread (or a process sharing the memory) rewrote it during the
 * call, and the kernel may have looked up either text. */
static __always_inline bool path_changed(const char *copy, __u64 uptr)
{
	if (!uptr)
		return false;
	__u32 zero = 0;
	char *now = bpf_map_lookup_elem(&reread, &zero);
	if (!now)
		return true;
	long n = bpf_probe_read_user_str(now, PATH_LEN, (const void *)uptr);
	if (n <= 0)
		return true;
	/* Up to and including the NUL of the text read now: a different length shows as a NUL
	 * against a character within it. */
	struct path_cmp c = { .a = copy, .b = now, .len = (__u32)n, .differ = false };
	bpf_loop(PATH_LEN, path_cmp_step, &c, 0);
	return c.differ;
}

/* Exit of a recorded file syscall: report refusals and opens of a denyRead mask. */
static __always_inline void file_exit(struct pending *p, long ret)
{
	bool report = ret == -EACCES || ret == -EPERM || ret == -EROFS;
	__u16 op = p->ev.op;
	/* A move or link between the sandbox's mounts (a host file into the project, say) fails
	 * with EXDEV even on one filesystem; userspace keeps those with a side outside the
	 * writable roots (red-team round 18). */
	if (ret == -EXDEV && (op == OP_RENAMEAT2 || op == OP_RENAMEAT || op == OP_RENAME ||
			      op == OP_LINKAT || op == OP_LINK))
		report = true;
	/* A BPF LSM rule matched (observe mode lets the call through): reported whatever the
	 * result, so the record says what enforce mode would refuse. */
	if (p->ev.flags & FL_LSM)
		report = true;
	if (!report && ret == -ENOENT && (p->wflags & W_MASK_ENOENT))
		report = true;
	if (!report && ret >= 0 && !(p->wflags & W_NO_MASKED_FILES) &&
	    (op == OP_OPENAT || op == OP_OPENAT2 || op == OP_OPEN) &&
	    !is_dev_null_path(p->ev.path) && fd_is_dev_null(ret)) {
		p->ev.flags |= FL_MASKED;
		report = true;
	}
	if (!report)
		return;
	if (p->ev.flags & FL_PATH_LATE) {
		__u64 late = 0;
		read_path(p->ev.path, p->upath, &late);
		read_path(p->ev.path2, p->upath2, &late);
	} else if (path_changed(p->ev.path, p->upath) || path_changed(p->ev.path2, p->upath2)) {
		p->ev.flags |= FL_RACED;
	}
	/* A path relative to the working directory, on a call with one path (path2 is free):
	 * the directory is resolved now. */
	bool cwd_relative = p->ev.path[0] && p->ev.path[0] != '/' &&
			    !(p->ev.flags & FL_RELATIVE) && !p->ev.path2[0];
	/* Relative to a directory descriptor, or no path at all (a call on a descriptor,
	 * AT_EMPTY_PATH, futimens): the descriptor's own names, the same way. */
	bool fd_relative = !cwd_relative && p->ev.path[0] != '/' && !p->ev.path2[0] &&
			   p->dfd != AT_FDCWD && (!p->ev.path[0] || (p->ev.flags & FL_RELATIVE));
	if (cwd_relative) {
		if (cwd_names(&p->ev.port))
			p->ev.flags |= FL_CWD;
		else
			p->ev.path2[0] = 0; /* the names a failed walk left are no detail */
	} else if (fd_relative) {
		if (dir_names((int)p->dfd, &p->ev.port))
			p->ev.flags = (p->ev.flags & ~FL_RELATIVE) | FL_CWD;
		else
			p->ev.path2[0] = 0;
	}
	/* After the walk: a change while it ran counts too. */
	if (raced(p, cwd_relative, fd_relative))
		p->ev.flags |= FL_RACED;
	p->ev.ret = (__s32)ret;
	fill_task(&p->ev, p->ev.cgroup_id);
	emit(&p->ev);
}

/*
 * Every system call of every process passes here, so the common case is short: a switch on
 * the number, and only for the calls recorded, the cgroup check. (One tracepoint for all calls instead
 * of a tracepoint per call: detaching each syscall tracepoint costs a grace period, ~70 ms
 * here, which would delay the end of every run by seconds.)
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long nr)
{
	nr = (int)nr; /* as the kernel dispatched it (see SYSCALL_NR) */
	struct file_args a;
	if (file_syscall(nr, &a))
		file_enter(regs, nr, &a);
	else if (nr == NR_close || nr == NR_dup2 || nr == NR_dup3 || nr == NR_close_range)
		fd_change_enter(nr);
	return 0;
}

/* The calls whose EACCES is a refusal of the sandbox's (round 20): `setpriority` raising a
 * priority without CAP_SYS_NICE, `process_madvise` without ptrace access to the target. */
static __always_inline bool eacces_refusal(long nr, long ret)
{
	return ret == -EACCES && (nr == NR_setpriority || nr == NR_process_madvise);
}

/* Namespace flags of clone/clone3 (CLONE_NEWNS ... CLONE_NEWNET, CLONE_NEWTIME). */
#define CLONE_NAMESPACES 0x7e020080ULL

/* clone3 refused ENOSYS by warden's filter (which cannot read its flags; C libraries then fall
 * back to clone): reported when the flags the call asked for create a namespace — a plain
 * thread or fork through clone3 (glibc tries it first) is no refusal. The flags are read from
 * the command's memory at the exit: another thread may have changed them since (round 21). */
static __always_inline bool clone3_namespaces(struct pt_regs *regs, long nr, long ret,
					      __u64 *flags)
{
	if (nr != NR_clone3 || ret != -ENOSYS || arg(regs, 1) < sizeof(__u64))
		return false;
	if (bpf_probe_read_user(flags, sizeof(*flags), (const void *)arg(regs, 0)))
		return false;
	return (*flags & CLONE_NAMESPACES) != 0;
}

/* A refusal at syscall entry by seccomp skips sys_enter but not sys_exit: an EPERM with no
 * pending record (or one of the EACCES above, or a clone3 asking for namespaces) is reported
 * with the call's number and its first two arguments (clone3: its flags and the struct's
 * size), and userspace keeps those of the calls it knows as refusals. */
static __always_inline void unobserved_exit(struct pt_regs *regs, long nr, long ret)
{
	bool clone3 = nr == NR_clone3 && ret == -ENOSYS;
	if (ret != -EPERM && !eacces_refusal(nr, ret) && !clone3)
		return;
	__u64 cg = watched_cgroup();
	if (!cg)
		return;
	__u64 clone_flags = 0;
	if (clone3 && !clone3_namespaces(regs, nr, ret, &clone_flags))
		return;
	struct pending *p = begin(cg, EV_SYSCALL, 0);
	if (!p)
		return;
	p->ev.flags = (__u64)nr;
	p->ev.family = (__u16)arg(regs, 0);
	/* The first two arguments whole (`family` keeps the first's low bits, as before). */
	__u64 args[2] = { clone3 ? clone_flags : arg(regs, 0), arg(regs, 1) };
	__builtin_memcpy(p->ev.addr, args, sizeof(args));
	/* A call of another ABI (warden's filter refuses them all): x32 numbers carry
	 * __X32_SYSCALL_BIT, an i386 call (int 0x80) runs with TS_COMPAT set. */
	p->ev.port = 0;
	if (nr & 0x40000000)
		p->ev.port = 1;
	else if (BPF_CORE_READ(bpf_get_current_task_btf(), thread_info.status) & 0x0002)
		p->ev.port = 2;
	p->ev.ret = (__s32)ret;
	emit(&p->ev);
}

/* Whether the exit of call `nr` can have a pending connect: the calls in which the cgroup
 * connect hooks run (connect, sendto/sendmsg with TCP fast open, an io_uring connect run
 * inline). */
static __always_inline bool may_have_connect(long nr)
{
	return nr == NR_connect || nr == NR_sendto || nr == NR_sendmsg || nr == NR_sendmmsg ||
	       nr == NR_io_uring_enter;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	long nr = SYSCALL_NR(regs);
	struct file_args a;
	/* An ioctl on a file of the read-only host (chattr's FS_IOC_SETFLAGS, FICLONE, ...)
	 * refused EROFS or EACCES: recorded from its exit alone (the arguments are still in
	 * `regs`), so the many ioctls that succeed cost nothing at entry. Its EPERMs are left to
	 * the seccomp path below: terminals answer EPERM to job control of another session,
	 * which is no refusal of the sandbox's (round 18). */
	if (nr == NR_ioctl && (ret == -EROFS || ret == -EACCES)) {
		a = (struct file_args){ OP_IOCTL, -1, -1, 1, 0 };
		file_enter(regs, nr, &a);
		struct pending *p =
			bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0, 0);
		if (p && p->nr == nr) {
			file_exit(p, ret);
			p->nr = -1;
		}
		return 0;
	}
	if (nr == NR_close || nr == NR_dup2 || nr == NR_dup3 || nr == NR_close_range) {
		fd_change_exit(nr);
		if (ret != -EPERM)
			return 0;
	}
	if (file_syscall(nr, &a)) {
		struct pending *p =
			bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0, 0);
		if (p && p->nr == nr) {
			file_exit(p, ret);
			p->nr = -1;
		} else {
			unobserved_exit(regs, nr, ret);
		}
		return 0;
	}
	/* A seccomp refusal (EPERM, or one of the EACCES refusals) is looked at whatever the
	 * call; otherwise only the calls in which the cgroup connect hooks run can have a pending
	 * connect. Every other call of every process leaves here. */
	if (ret != -EPERM && !may_have_connect(nr) && !eacces_refusal(nr, ret) &&
	    !(nr == NR_clone3 && ret == -ENOSYS))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending *p = bpf_map_lookup_elem(&pending_calls, &tid);
	if (!p) {
		unobserved_exit(regs, nr, ret);
		return 0;
	}
	bool send = p->nr == NR_ANY_SEND &&
		    (nr == NR_sendto || nr == NR_sendmsg || nr == NR_sendmmsg);
	bool conn = p->nr == NR_ANY_CONNECT && may_have_connect(nr);
	if (p->nr != nr && !send && !conn) {
		/* A leftover of a call that never returned through here: not this call's. */
		bpf_map_delete_elem(&pending_calls, &tid);
		unobserved_exit(regs, nr, ret);
		return 0;
	}
	/* A datagram that left (on the sandbox's own loopback) is no record; sendmmsg counts
	 * the messages sent, and the hook saw the last one tried: recorded when not all left. */
	if (p->ev.kind == EV_CONNECT && p->ev.op == OP_SENDMSG && ret >= 0 &&
	    !(nr == NR_sendmmsg && ret < (long)(unsigned int)arg(regs, 2))) {
		bpf_map_delete_elem(&pending_calls, &tid);
		return 0;
	}
	p->ev.ret = (__s32)ret;
	p->ev.ts_ns = bpf_ktime_get_boot_ns();
	emit(&p->ev);
	bpf_map_delete_elem(&pending_calls, &tid);
	return 0;
}

/* exec of each binary: the filename the kernel resolved and the head of argv. */
SEC("tracepoint/sched/sched_process_exec")
int sched_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	__u64 cg = watched_cgroup();
	if (!cg)
		return 0;
	struct pending *p = begin(cg, EV_EXEC, 0);
	if (!p)
		return 0;
	unsigned int off = BPF_CORE_READ(ctx, __data_loc_filename) & 0xffff;
	long n = bpf_probe_read_kernel_str(p->ev.path, PATH_LEN, (void *)ctx + off);
	if (n >= PATH_LEN)
		p->ev.flags |= FL_TRUNCATED;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	unsigned long start = BPF_CORE_READ(task, mm, arg_start);
	unsigned long end = BPF_CORE_READ(task, mm, arg_end);
	unsigned long len = end > start ? end - start : 0;
	if (len > PATH_LEN - 1)
		len = PATH_LEN - 1;
	len &= PATH_LEN - 1;
	if (len && bpf_probe_read_user(p->ev.path2, len, (const void *)start) == 0)
		p->ev.path2[len & (PATH_LEN - 1)] = 0;
	else
		p->ev.path2[0] = 0;
	/* argv bytes are NUL-separated: their length goes in `port` for the decoder. */
	p->ev.port = (__u16)len;
	emit(&p->ev);
	return 0;
}

/* connect(): the address as the kernel copied it, recorded at the cgroup hook and reported
 * with the syscall's result at sys_exit_connect. Always allowed: the sandbox's empty network
 * namespace refuses on its own. */
static __always_inline void connect_begin(struct bpf_sock_addr *ctx, __u16 family, __u16 op)
{
	__u64 cg = watched_cgroup();
	if (!cg)
		return;
	struct pending *p = begin(cg, EV_CONNECT, op);
	if (!p)
		return;
	p->ev.family = family;
	p->ev.port = bpf_ntohs((__u16)ctx->user_port);
	if (family == AF_INET) {
		__u32 ip = ctx->user_ip4;
		__builtin_memcpy(p->ev.addr, &ip, 4);
	} else {
		/* Constant indices: the verifier wants context loads at fixed offsets. */
		__u32 w0 = ctx->user_ip6[0], w1 = ctx->user_ip6[1];
		__u32 w2 = ctx->user_ip6[2], w3 = ctx->user_ip6[3];
		__builtin_memcpy(p->ev.addr, &w0, 4);
		__builtin_memcpy(p->ev.addr + 4, &w1, 4);
		__builtin_memcpy(p->ev.addr + 8, &w2, 4);
		__builtin_memcpy(p->ev.addr + 12, &w3, 4);
	}
	p->ev.flags = ctx->type;
	/* A connect hook also runs in sendto/sendmsg (TCP fast open) and io_uring_enter; a
	 * datagram send hook in any of the send calls. */
	p->nr = op == OP_SENDMSG ? NR_ANY_SEND : NR_ANY_CONNECT;
	commit(p);
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx)
{
	connect_begin(ctx, AF_INET, OP_CONNECT);
	return 1;
}

SEC("cgroup/connect6")
int connect6(struct bpf_sock_addr *ctx)
{
	connect_begin(ctx, AF_INET6, OP_CONNECT);
	return 1;
}

/* A datagram sent to an address (UDP sendto/sendmsg on an unconnected socket, which never
 * connects): recorded when the send fails — in the sandbox's empty network namespace every
 * send off its loopback does. */
SEC("cgroup/sendmsg4")
int sendmsg4(struct bpf_sock_addr *ctx)
{
	connect_begin(ctx, AF_INET, OP_SENDMSG);
	return 1;
}

SEC("cgroup/sendmsg6")
int sendmsg6(struct bpf_sock_addr *ctx)
{
	connect_begin(ctx, AF_INET6, OP_SENDMSG);
	return 1;
}

/*
 * connect() or a datagram sendto()/sendmsg() to a unix socket path. Where allowUnixSockets
 * is enforced for the cgroup (unix_enforce), only the listed paths pass. connect() is
 * recorded whatever the verdict; a send only when refused (a datagram socket may send to an
 * allowed path thousands of times).
 */
static __always_inline int unix_hook(struct bpf_sock_addr *ctx, __u16 op)
{
	__u64 cg = watched_cgroup();
	if (!cg)
		return 1;
	bool enforce = bpf_map_lookup_elem(&unix_enforce, &cg) != 0;
	if (op == OP_SENDMSG && !enforce)
		return 1;
	struct pending *p = begin(cg, EV_UNIX, op);
	if (!p)
		return op == OP_SENDMSG ? 0 : 1;
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	struct sockaddr *uaddr = sa->uaddr;
	__u32 len = sa->uaddrlen;
	p->ev.family = AF_UNIX;
	/* sun_path starts after sun_family; abstract names start with a NUL byte, so the raw
	 * bytes are copied and their length travels in `flags`. */
	if (len > 2)
		len -= 2;
	else
		len = 0;
	if (len > SUN_PATH_LEN)
		len = SUN_PATH_LEN;
	if (len && bpf_probe_read_kernel(p->ev.path, len & 0x7f, (void *)uaddr + 2))
		len = 0;
	p->ev.flags = len;
	p->nr = op == OP_SENDMSG ? NR_ANY_SEND : NR_connect;
	int allow = 1;
	if (enforce) {
		__u32 zero = 0;
		struct unix_key *k = bpf_map_lookup_elem(&unix_scratch, &zero);
		if (!k) {
			allow = 0;
		} else {
			__builtin_memset(k->path, 0, sizeof(k->path));
			k->cgroup_id = cg;
			if (len && bpf_probe_read_kernel(k->path, len & 0x7f, (void *)uaddr + 2))
				len = 0;
			/* The path ends at its first NUL (clients pass sizeof(sockaddr_un) too). */
			int ended = 0;
			for (int i = 0; i < UNIX_KEY_LEN; i++) {
				if (ended)
					k->path[i] = 0;
				else if (k->path[i] == 0)
					ended = 1;
			}
			if (k->path[0] == 0 || !bpf_map_lookup_elem(&unix_allow, k))
				allow = 0;
		}
		if (!allow)
			p->ev.flags |= FL_UNIX_DENIED;
	}
	if (op != OP_SENDMSG || !allow)
		commit(p);
	return allow;
}

SEC("cgroup/connect_unix")
int connect_unix(struct bpf_sock_addr *ctx)
{
	return unix_hook(ctx, OP_CONNECT);
}

SEC("cgroup/sendmsg_unix")
int sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return unix_hook(ctx, OP_SENDMSG);
}
