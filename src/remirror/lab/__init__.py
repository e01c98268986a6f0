"""The lab: a throwaway VM with two sites, for trying, rehearsing and testing.

The machines remirror is developed on (and many laptops) cannot load md,
device-mapper, LIO or iscsi_tcp. The lab boots Debian's stock kernel in QEMU
(TCG: see docs/lab.md for why not KVM) through virtme-ng, which shares the
host's root filesystem read-only, so this checkout and its venv run inside.

Layout inside the VM:
- site A is the VM's root network namespace (iscsid only works there);
- site B is network namespace `site-b` with its own mount and UTS namespaces
  (its own /etc/iscsi, /etc/target, /etc/mdadm and hostname), joined by a
  veth pair on 192.0.2.0/24 (TEST-NET-1: exists only inside the VM);
- disks are virtio-blk devices backed by sparse files on the host (with
  `--disk-model`: null_blk devices in the guest's memory that serve I/O as
  the model's disks do), each wrapped in a device-mapper linear target and
  named /dev/lab/a0, /dev/lab/b0, ..., /dev/lab/a-fast0, /dev/lab/b-fast0.

Modules: `spec` (pure: what a lab is), `model` (pure: the performance model
and its time dilation), `dilation` (the probes that measure it), `host`
(boots it), `guest` (sets it up inside), `disks` (the disks it makes, plain
or modelled), `net` (link and WAN control
inside), `demo` (the narrated tour). `hosts` is the other lab: separate VMs, each with its own
kernel and systemd, booted and powered off from the test runner (docs/lab.md, "The hosts' lab").
"""
