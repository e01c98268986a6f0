#!/bin/bash
# Inside a plain lab: does the iSCSI session of the lab's mirror hold over a slow link with a
# TCP window of WINDOW bytes (0: the kernel's autotuning, remirror's), under 90 s of sequential
# writes? The `wan` timeouts, 1 Mbit/s and 25 ms each way; prints the send buffer and the round
# trip every 15 s, the rate, and the session and md at the end.
#
#   remirror lab run -- bash bench/slow_link_session.sh 0        (or 524288: open-iscsi's own)
#
# bench/results/2026-12-01-iscsi-window.md has what it found.
set -u
cd "$(dirname "$0")/.."
WINDOW=${1:-0}
python3 - "$WINDOW" <<'PY' > /run/lab-wan.yaml
import re, sys
t = open("profiles/lab.yaml").read()
block = ("      timeouts:\n"
         "        node.conn[0].timeo.noop_out_interval: 10\n"
         "        node.conn[0].timeo.noop_out_timeout: 30\n"
         "        node.session.cmds_max: 1024\n"
         "        node.session.queue_depth: 128\n"
         f"        node.conn[0].tcp.window_size: {sys.argv[1]}\n")
print(re.sub(r"      timeouts:\n(        .*\n)+", block, t), end="")
PY
remirror apply --yes /run/lab-wan.yaml >/dev/null || { echo "apply failed"; exit 1; }
for _ in $(seq 60); do grep -q '\[UU\]' /proc/mdstat && ! grep -q recovery /proc/mdstat && break; sleep 5; done
iscsiadm -m node -o show | grep -e window -e noop -e cmds_max
remirror lab wan --delay 25ms --rate 1mbit
fio --name=s --filename=/dev/md/lab0 --rw=write --bs=1M --iodepth=4 --ioengine=libaio --direct=1 \
    --offset=64M --size=64M --time_based --runtime=90 --output-format=terse >/tmp/slow-fio.txt 2>&1 &
for _ in 1 2 3 4 5 6; do
    sleep 15
    ss -tnmi state established '( dport = :3260 )' | grep -o 'tb[0-9]*\|unacked:[0-9]*\| rtt:[0-9.]*' | tr '\n' ' '
    grep -o '\[U.\]' /proc/mdstat
done
wait
echo "fio: $(cut -d';' -f48 /tmp/slow-fio.txt) KB/s"
iscsiadm -m session -P 1 | grep -i "session state"
cat /proc/mdstat
remirror lab wan --clear
