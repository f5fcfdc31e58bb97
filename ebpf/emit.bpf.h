/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How both objects (warden.bpf.c, warden_lsm.bpf.c) send a record: included by each after
 * its `events` ring buffer and `drops` counters, which the LSM object shares with the
 * tracepoint object (runtime/src/audit/lsm.rs), as it shares `rates`.
 */
#ifndef WARDEN_EMIT_BPF_H
#define WARDEN_EMIT_BPF_H

/*
 * A sandbox's share of a ring buffer that several sandboxes use (the node daemon's,
 * docs/audit-daemon.md), per cgroup id. Only the daemon fills it: a run's own programs
 * serve one sandbox, which has the whole ring buffer.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct rate);
} rates SEC(".maps");

static __always_inline void count_drop(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &slot);
	if (n)
		*n += 1;
}

/*
 * Sends `e`. A sandbox with a share sends `share` events per window whatever the ring
 * buffer holds, and more only while the ring buffer is less than half full: one sandbox's
 * flood stops at half the buffer, and the other half stays free for the others. (The window's
 * counters are updated without atomics: concurrent CPUs may let a few more events through.)
 */
static __always_inline void emit(struct event *e)
{
	__u64 cg = e->cgroup_id;
	struct rate *r = bpf_map_lookup_elem(&rates, &cg);
	if (r) {
		__u64 now = bpf_ktime_get_ns();
		if (now - r->window_ns >= RATE_WINDOW_NS) {
			r->window_ns = now;
			r->sent = 0;
		}
		if (r->sent >= r->share &&
		    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) * 2 >=
			    bpf_ringbuf_query(&events, BPF_RB_RING_SIZE)) {
			__sync_fetch_and_add(&r->limited, 1);
			count_drop(DROP_LIMITED);
			return;
		}
		r->sent += 1;
	}
	if (bpf_ringbuf_output(&events, e, sizeof(*e), 0)) {
		count_drop(DROP_RINGBUF);
		if (r)
			__sync_fetch_and_add(&r->ring_full, 1);
	}
}

#endif
