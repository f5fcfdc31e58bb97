// SPDX-License-Identifier: Apache-2.0
/*
 * warden's BPF LSM programs (issue #5): the third layer. See ebpf/README.md and
 * docs/decisions/0004-lsm-path.md.
 *
 * A separate object from warden.bpf.c so that the tracepoint programs keep loading on kernels
 * that refuse LSM programs (EPERM: no BPF trampolines, bpf not among the active LSMs). warden
 * tries to load this one at run time; when it loads, its programs judge what the sandbox's
 * hardened processes do against the sandbox's rules:
 *
 * - file_open (lsm.s, bpf_d_path for the record), file_permission: reads of denyRead inodes,
 *   writes of regular files outside the writable roots;
 * - inode_create, inode_unlink, inode_rename: changes outside the writable roots;
 * - bprm_check_security (lsm.s): exec of a denyRead file;
 * - socket_connect: records connects in families the cgroup programs do not see;
 * - ptrace_access_check: ptrace of a process outside the sandbox.
 *
 * Scope: the sandbox's cgroup (ancestor at watch_config[0]) must be in lsm_cgroups, and the
 * task must be hardened (seccomp filter mode, which warden installs right before exec of the
 * command): the sandbox's init, which still builds the mount view, is never judged. Every other
 * process of the machine is left alone (return 0 before any rule is looked at).
 *
 * Rules are inodes, not names: lsm_inodes holds (cgroup, dev, ino) of the writable roots, the
 * protected paths, the denyRead and allowRead paths; a file is judged by the nearest ancestor
 * (itself included) that has a class. Names are what the mount layer works with; an inode
 * rule also holds for a second name of the same file (a hard link) or a descriptor passed in.
 *
 * Records: a rule that matches marks the thread's pending syscall entry (pending_files, shared
 * with warden.bpf.c) with FL_LSM (and FL_LSM_DENIED when it refused), so tp_btf/sys_exit emits
 * the one record of the call with its result. Only when no entry of the same syscall exists
 * (exec, io_uring, file_permission, ptrace) does a program here emit its own record.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "warden.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define EPERM 1
#define EACCES 13
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2
#define MAY_READ 0x4
#define S_IFMT 00170000
#define S_IFREG 0100000
#define SECCOMP_MODE_FILTER 2
/* Ancestors looked at for an inode's class; deeper files are judged as having none. */
#define MAX_DEPTH 64
#define MAX_CGROUP_DEPTH 32

/* ---- shared with warden.bpf.c: userspace hands this object those maps' descriptors ---- */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

#include "emit.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} watch_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pending);
} pending_files SEC(".maps");

/* ---- this object's own maps ---- */

/* cgroup id → LSM_OBSERVE or LSM_ENFORCE. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} lsm_cgroups SEC(".maps");

/* (cgroup, dev, ino) → LSM_INO_* bits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lsm_inode_key);
	__type(value, __u32);
} lsm_inodes SEC(".maps");

/* A record under construction (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} lsm_scratch SEC(".maps");

/* The sandbox the current task is judged for: its mode, and its cgroup id in *cg; 0 when
 * the task is outside every sandbox with LSM rules, or not hardened yet. */
static __always_inline __u32 sandbox_mode(__u64 *cg)
{
	__u32 zero = 0;
	__u32 *level = bpf_map_lookup_elem(&watch_config, &zero);
	if (!level || !*level)
		return 0;
	__u64 id = bpf_get_current_ancestor_cgroup_id(*level);
	if (!id)
		return 0;
	__u32 *mode = bpf_map_lookup_elem(&lsm_cgroups, &id);
	if (!mode)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	if (BPF_CORE_READ(task, seccomp.mode) != SECCOMP_MODE_FILTER)
		return 0;
	*cg = id;
	return *mode;
}

/* The classes among `mask` of the nearest ancestor of `d` (itself included) that has any. */
static __always_inline __u32 nearest(__u64 cg, struct dentry *d, __u32 mask)
{
	struct lsm_inode_key k;
	__builtin_memset(&k, 0, sizeof(k));
	k.cgroup_id = cg;
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (!d)
			break;
		struct inode *inode = BPF_CORE_READ(d, d_inode);
		if (inode) {
			k.ino = BPF_CORE_READ(inode, i_ino);
			k.dev = BPF_CORE_READ(inode, i_sb, s_dev);
			__u32 *c = bpf_map_lookup_elem(&lsm_inodes, &k);
			if (c && (*c & mask))
				return *c & mask;
		}
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		if (parent == d)
			break;
		d = parent;
	}
	return 0;
}

/* Whether the sandbox's rules refuse reading `d`: a denyRead inode, nearer than any allowRead. */
static __always_inline bool read_denied(__u64 cg, struct dentry *d)
{
	return nearest(cg, d, LSM_INO_DENY_READ | LSM_INO_ALLOW_READ) & LSM_INO_DENY_READ;
}

/* Whether the sandbox's rules refuse changing `d`: not below a writable root, or below a
 * protected path nearer than it. */
static __always_inline bool write_denied(__u64 cg, struct dentry *d)
{
	return nearest(cg, d, LSM_INO_WRITABLE | LSM_INO_PROTECTED) != LSM_INO_WRITABLE;
}

/* Marks the thread's pending entry of the current syscall, if it is a file call. */
static __always_inline bool mark_pending(__u64 flags)
{
	struct pending *p = bpf_task_storage_get(&pending_files, bpf_get_current_task_btf(), 0, 0);
	if (!p || p->ev.kind != EV_FILE)
		return false;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	/* The low 32 bits, as the kernel dispatched it (warden.bpf.c: SYSCALL_NR). */
	long nr = (int)BPF_CORE_READ(regs, orig_ax);
	if (p->nr != nr)
		return false;
	p->ev.flags |= flags;
	return true;
}

static __always_inline struct event *new_event(__u64 cg, __u16 kind, __u16 op)
{
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&lsm_scratch, &zero);
	if (!e)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cg;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->kind = kind;
	e->op = op;
	e->ret = 0;
	e->flags = 0;
	e->family = 0;
	e->port = 0;
	e->version = EVENT_VERSION;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->path[0] = 0;
	e->path2[0] = 0;
	return e;
}

/* A file rule matched: marks the pending entry, or returns a fresh standalone record for the
 * caller to name the file in and emit. */
static __always_inline struct event *file_match(__u64 cg, bool deny, __u16 op, __u64 oflags)
{
	__u64 fl = FL_LSM | (deny ? FL_LSM_DENIED : 0);
	if (mark_pending(fl))
		return 0;
	struct event *e = new_event(cg, EV_LSM_FILE, op);
	if (!e)
		return 0;
	e->flags = fl | (oflags & 0xffffffffULL);
	e->ret = deny ? -EACCES : 0;
	return e;
}

/* The last component of `d` into `dst` (what an inode hook knows of the name). */
static __always_inline void dentry_name(char *dst, struct dentry *d)
{
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	if (!name || bpf_probe_read_kernel_str(dst, PATH_LEN, name) < 0)
		dst[0] = 0;
}

SEC("lsm.s/file_open")
int BPF_PROG(file_open, struct file *file, int ret)
{
	if (ret)
		return ret;
	__u64 cg = 0;
	__u32 mode = sandbox_mode(&cg);
	if (!mode)
		return 0;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	__u32 fmode = BPF_CORE_READ(file, f_mode);
	umode_t imode = BPF_CORE_READ(file, f_inode, i_mode);
	bool bad = (fmode & FMODE_READ) && read_denied(cg, d);
	if (!bad && (fmode & FMODE_WRITE) && (imode & S_IFMT) == S_IFREG)
		bad = write_denied(cg, d);
	if (!bad)
		return 0;
	bool deny = mode == LSM_ENFORCE;
	struct event *e = file_match(cg, deny, OP_OPENAT, BPF_CORE_READ(file, f_flags));
	if (e) {
		long n = bpf_d_path((struct path *)&file->f_path, e->path, PATH_LEN);
		if (n < 0)
			dentry_name(e->path, d);
		emit(e);
	}
	return deny ? -EACCES : 0;
}

/* read(2) and friends through a descriptor: one opened before the rules applied, or passed
 * in. Enforce mode only (in observe mode the open was recorded, and every read would repeat
 * it). */
SEC("lsm/file_permission")
int BPF_PROG(file_permission, struct file *file, int mask, int ret)
{
	if (ret)
		return ret;
	if (!(mask & MAY_READ))
		return 0;
	__u64 cg = 0;
	if (sandbox_mode(&cg) != LSM_ENFORCE)
		return 0;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	if (!read_denied(cg, d))
		return 0;
	struct event *e = new_event(cg, EV_LSM_FILE, OP_READ);
	if (e) {
		e->flags = FL_LSM | FL_LSM_DENIED;
		e->ret = -EACCES;
		dentry_name(e->path, d);
		emit(e);
	}
	return -EACCES;
}

static __always_inline int inode_change(struct dentry *d, struct dentry *d2, __u16 op)
{
	__u64 cg = 0;
	__u32 mode = sandbox_mode(&cg);
	if (!mode)
		return 0;
	if (!write_denied(cg, d) && (!d2 || !write_denied(cg, d2)))
		return 0;
	bool deny = mode == LSM_ENFORCE;
	struct event *e = file_match(cg, deny, op, 0);
	if (e) {
		dentry_name(e->path, d);
		if (d2)
			dentry_name(e->path2, d2);
		emit(e);
	}
	return deny ? -EACCES : 0;
}

SEC("lsm/inode_create")
int BPF_PROG(inode_create, struct inode *dir, struct dentry *dentry, umode_t mode, int ret)
{
	if (ret)
		return ret;
	return inode_change(dentry, 0, OP_CREAT);
}

SEC("lsm/inode_unlink")
int BPF_PROG(inode_unlink, struct inode *dir, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	return inode_change(dentry, 0, OP_UNLINK);
}

SEC("lsm/inode_rename")
int BPF_PROG(inode_rename, struct inode *old_dir, struct dentry *old_dentry,
	     struct inode *new_dir, struct dentry *new_dentry, int ret)
{
	if (ret)
		return ret;
	return inode_change(old_dentry, new_dentry, OP_RENAME);
}

/* exec of a denyRead file (successful execs are recorded by sched_process_exec). */
SEC("lsm.s/bprm_check_security")
int BPF_PROG(bprm_check_security, struct linux_binprm *bprm, int ret)
{
	if (ret)
		return ret;
	__u64 cg = 0;
	__u32 mode = sandbox_mode(&cg);
	if (!mode)
		return 0;
	struct file *file = bprm->file;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	if (!read_denied(cg, d))
		return 0;
	bool deny = mode == LSM_ENFORCE;
	struct event *e = new_event(cg, EV_LSM_FILE, OP_EXEC);
	if (e) {
		e->flags = FL_LSM | (deny ? FL_LSM_DENIED : 0);
		e->ret = deny ? -EACCES : 0;
		if (bpf_d_path((struct path *)&file->f_path, e->path, PATH_LEN) < 0)
			dentry_name(e->path, d);
		emit(e);
	}
	return deny ? -EACCES : 0;
}

/* connect() in a family the cgroup programs do not see (vsock, netlink, packet, ...):
 * recorded, never refused here (seccomp and the empty network namespace decide). */
SEC("lsm/socket_connect")
int BPF_PROG(socket_connect, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	if (ret)
		return ret;
	__u64 cg = 0;
	if (!sandbox_mode(&cg))
		return 0;
	__u16 family = BPF_CORE_READ(address, sa_family);
	if (family == AF_UNIX || family == AF_INET || family == AF_INET6)
		return 0;
	struct event *e = new_event(cg, EV_SOCKET, OP_CONNECT);
	if (e) {
		e->family = family;
		e->flags = FL_LSM;
		emit(e);
	}
	return 0;
}

/* The id of `task`'s cgroup v2 ancestor at `level`, or 0 when it is not that deep. */
static __always_inline __u64 task_ancestor_cgroup(struct task_struct *task, __u32 level)
{
	struct cgroup *cgrp = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	if (!cgrp)
		return 0;
	int lvl = BPF_CORE_READ(cgrp, level);
	for (int i = 0; i < MAX_CGROUP_DEPTH; i++) {
		if (lvl <= (int)level)
			break;
		/* `self` is a cgroup's first member: its css's parent is the parent cgroup. */
		cgrp = (struct cgroup *)BPF_CORE_READ(cgrp, self.parent);
		if (!cgrp)
			return 0;
		lvl = BPF_CORE_READ(cgrp, level);
	}
	if (lvl != (int)level)
		return 0;
	return BPF_CORE_READ(cgrp, kn, id);
}

/* ptrace (and /proc/PID/mem and friends) of a process outside the sandbox. */
SEC("lsm/ptrace_access_check")
int BPF_PROG(ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	if (ret)
		return ret;
	__u64 cg = 0;
	__u32 m = sandbox_mode(&cg);
	if (!m)
		return 0;
	__u32 zero = 0;
	__u32 *level = bpf_map_lookup_elem(&watch_config, &zero);
	if (!level)
		return 0;
	if (task_ancestor_cgroup(child, *level) == cg)
		return 0;
	bool deny = m == LSM_ENFORCE;
	struct event *e = new_event(cg, EV_PTRACE, OP_PTRACE);
	if (e) {
		e->flags = FL_LSM | (deny ? FL_LSM_DENIED : 0) | (__u64)BPF_CORE_READ(child, tgid);
		e->family = (__u16)mode;
		e->ret = deny ? -EPERM : 0;
		bpf_probe_read_kernel_str(e->path, COMM_LEN, &child->comm);
		emit(e);
	}
	return deny ? -EPERM : 0;
}
