#!/bin/sh
# Does md's write-behind happen? Run inside a lab (docs/performance.md, "Write-behind"):
#   remirror lab run --slow-disk-ms 8 -- sh bench/write_behind_order.sh
# Two local RAID1 arrays with a write-mostly leg and a backlog of 1024: the
# write-mostly leg second (as remirror creates its mirrors), then first.
# bitmap/max_backlog_used counts behind writes; 0 means none went behind.
# Debian's 6.1.0-56 (2026-11-24): second 0, first 6.
one() {  # $1: which order
  MD=$(basename $(readlink -f /dev/md/wb))
  grep -A1 "^$MD" /proc/mdstat | head -1
  fio --name=x --filename=/dev/md/wb --rw=randwrite --bs=4k --iodepth=1 --ioengine=psync --direct=1 --offset=64M --size=64M --time_based --runtime=5 --output-format=json | python3 -c "import json,sys; w=json.load(sys.stdin)['jobs'][0]['write']; print('mean ms', round(w['clat_ns']['mean']/1e6,2))"
  dd if=/dev/zero of=/dev/md/wb bs=4k count=2000 seek=20000 status=none; sync
  echo "$1: backlog $(cat /sys/block/$MD/md/bitmap/backlog) max_backlog_used $(cat /sys/block/$MD/md/bitmap/max_backlog_used)"
  mdadm --stop /dev/md/wb; mdadm --zero-superblock /dev/lab/a1 /dev/lab/a2
}
mdadm --create /dev/md/wb --run --level=1 --raid-devices=2 --metadata=1.2 --bitmap=internal --write-behind=1024 --assume-clean /dev/lab/a1 --write-mostly /dev/lab/a2
one local-first
mdadm --create /dev/md/wb --run --level=1 --raid-devices=2 --metadata=1.2 --bitmap=internal --assume-clean /dev/lab/a2 /dev/lab/a1
MD=$(basename $(readlink -f /dev/md/wb))
echo writemostly > /sys/block/$MD/md/dev-dm-2/state; echo 1024 > /sys/block/$MD/md/bitmap/backlog
one wm-first
