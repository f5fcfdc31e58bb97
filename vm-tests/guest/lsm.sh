#!/bin/sh
# The BPF LSM test (issue #5), run as pid 1 of a qemu guest by `cargo xtask vm-test`
# (vm-tests/README.md). Prints `WARDEN-VM: ok NAME` per check, `WARDEN-VM-FAIL: NAME: WHY` and
# exits qemu with 1 (status 3) on the first failure, `WARDEN-VM-PASS` and 16 (status 33) at
# the end. Everything runs as root in the guest; nothing here touches the host.

export PATH=/bin HOME=/root USER=root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
mount -t securityfs securityfs /sys/kernel/security
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /root

say() { echo "WARDEN-VM: $*"; }
fail() {
	echo "WARDEN-VM-FAIL: $*"
	/bin/outb 1
	poweroff -f
}
ok() { say "ok $*"; }
elapsed() { cut -d' ' -f1 /proc/uptime; }

say "kernel $(uname -r)"
lsms=$(cat /sys/kernel/security/lsm)
say "lsm $lsms"
case ",$lsms," in *,bpf,*) ok bpf-is-an-active-lsm ;; *) fail bpf-is-an-active-lsm: "$lsms" ;; esac

# warden doctor loads and attaches warden's own LSM object.
doctor=$(warden doctor 2>&1)
echo "$doctor" | grep -E '^(ok  |FAIL) (audit\.lsm|bpf\.lsm)'
echo "$doctor" | grep -q '^ok   audit.lsm:' || fail doctor-audit-lsm
ok doctor-loads-the-lsm-programs

# A denyRead file, and a second name of it that the mount view does not mask: a hard link in a
# writable root. Only the LSM judges the file by its inode.
mkdir -p /secret /work
echo topsecret >/secret/key
ln /secret/key /work/link
cat >/tmp/enforce.json <<'JSON'
{
  "filesystem": { "denyRead": ["/secret/key"], "allowWrite": ["/work"] },
  "warden": { "audit": { "enforce": true } }
}
JSON
cat >/tmp/observe.json <<'JSON'
{
  "filesystem": { "denyRead": ["/secret/key"], "allowWrite": ["/work"] }
}
JSON

# Enforce: inside, the masked path and the hard link are refused; outside the sandbox's cgroup,
# while the programs are attached and the sandbox runs, the same link reads fine.
say "enforce run starts at $(elapsed)s"
warden run --settings /tmp/enforce.json --violations /tmp/enforce.jsonl --cwd /work -- \
	/bin/sh -c 'grep Seccomp: /proc/self/status; cat /secret/key; echo "masked-rc=$?";
		cat /work/link; echo "link-rc=$?";
		echo x >/etc/lsm-write; echo "etc-write-rc=$?"; touch /work/inside; sleep 6' \
	>/tmp/enforce.out 2>&1 &
run=$!
i=0
while [ ! -e /work/inside ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
[ -e /work/inside ] || { cat /tmp/enforce.out; fail enforce-run-started; }
outside=$(cat /work/link 2>&1) || fail outside-read: "$outside"
[ "$outside" = topsecret ] || fail outside-read: "$outside"
ok a-process-outside-the-sandbox-reads-the-link-while-enforce-runs
wait $run
rc=$?
say "enforce run ended at $(elapsed)s, exit $rc"
cat /tmp/enforce.out
grep -q '^link-rc=1' /tmp/enforce.out || fail enforce-link-refused
grep -q 'topsecret' /tmp/enforce.out && fail enforce-link-refused: the sandbox read the secret
ok the-lsm-refuses-the-hard-link-inside-the-sandbox
grep -q '^masked-rc=1' /tmp/enforce.out || fail enforce-masked-refused
ok the-mount-view-still-refuses-the-masked-path
cat /tmp/enforce.jsonl
grep '"target":"/work/link"' /tmp/enforce.jsonl | grep '"layer":"lsm"' | grep -q '"EACCES"' ||
	fail enforce-record: no lsm record of /work/link
ok the-refusal-is-recorded-with-layer-lsm

# Observe: the same read goes through (nothing beneath the mount view refuses), and the LSM
# records what enforce mode would have refused.
warden run --settings /tmp/observe.json --violations /tmp/observe.jsonl --cwd /work -- \
	/bin/sh -c 'cat /work/link; echo "link-rc=$?"' >/tmp/observe.out 2>&1
cat /tmp/observe.out
grep -q '^link-rc=0' /tmp/observe.out || fail observe-read-allowed
ok observe-mode-refuses-nothing
cat /tmp/observe.jsonl
grep '"target":"/work/link"' /tmp/observe.jsonl | grep '"layer":"lsm"' | grep -q 'observe mode' ||
	fail observe-record: no observe record of /work/link
ok observe-records-what-enforce-would-refuse
v=$(warden violations --file /tmp/observe.jsonl 2>&1)
echo "$v"
echo "$v" | grep -q '/work/link' || fail violations-lists-the-observe-record
ok warden-violations-lists-the-observe-record

# The audit daemon loads the programs once, the LSM ones included: an audited run that
# registers with it gets the LSM's observe records from the daemon.
mkdir -p /run/warden
warden audit --socket /run/warden/audit.sock --violations /tmp/node.jsonl >/tmp/daemon.out 2>&1 &
daemon=$!
i=0
while [ ! -S /run/warden/audit.sock ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
[ -S /run/warden/audit.sock ] || { cat /tmp/daemon.out; fail daemon-started; }
grep -q 'BPF LSM programs loaded' /tmp/daemon.out || { cat /tmp/daemon.out; fail daemon-loads-lsm; }
ok the-daemon-loads-the-lsm-programs
WARDEN_AUDIT_SOCKET=/run/warden/audit.sock warden run --settings /tmp/observe.json \
	--violations /tmp/daemon-observe.jsonl --cwd /work -- \
	/bin/sh -c 'cat /work/link; echo "link-rc=$?"' >/tmp/daemon-observe.out 2>&1
cat /tmp/daemon-observe.out
cat /tmp/daemon.out
grep -q '^link-rc=0' /tmp/daemon-observe.out || fail daemon-observe-read-allowed
grep -q 'judged by the BPF LSM programs (observe)' /tmp/daemon.out ||
	fail daemon-scoped-the-run: not scoped
cat /tmp/daemon-observe.jsonl
grep '"target":"/work/link"' /tmp/daemon-observe.jsonl | grep '"layer":"lsm"' |
	grep -q 'observe mode' || fail daemon-observe-record: no observe record of /work/link
ok the-daemon-records-lsm-observe-for-a-registered-run
kill $daemon
wait $daemon

say "done at $(elapsed)s"
echo WARDEN-VM-PASS
/bin/outb 16
poweroff -f
