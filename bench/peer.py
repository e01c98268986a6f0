"""remirror beside DRBD: the same modelled disks, the same link, the same workloads, one boot.

    ./dev setup                     # once: the hosts' image (drbd-utils, fio, PostMark in it)
    BENCH_ONLY=peer ./dev bench     # or: .venv/bin/python bench/peer.py OUT; then
    .venv/bin/python bench/peer_report.py OUT

Debian 12's kernel ships DRBD 8.4's module, with drbd-utils beside it: the mirror a Linux
user would otherwise pick can run in the same lab as remirror's. It runs on the hosts' lab
(two VMs, each its own kernel): DRBD's kernel sockets live in the initial network namespace,
so the single-VM lab, whose site B is a namespace, cannot hold both ends over its link.

One boot of two hosts of 2 GiB (remirror.lab.hosts). First each host's dilation is measured
against this machine (remirror.lab.dilation's probes), and each host gets disks of the
model's HDD on null_blk at that dilation (remirror.lab.disks): /dev/lab/a0 and b0 for
remirror's mirror, a1 and b1 for DRBD's pair, a2 alone on site-a, the baseline. Then ROUNDS
rounds (PEER_ROUNDS, 3), each:

- the initial sync of blank disks over the LAN, each mirror alone: `remirror apply` (md's
  copy of the whole disk) and DRBD's first sync, from the user guide's resource; the copy's
  seconds from each one's own kernel log, and the bytes site-a sent and site-b's disk took;
- a warm-up (neither mirror's metadata cold: md's bitmap, DRBD's activity log), the
  baseline's fio jobs, then four cells, the LAN and the 14 ms, 1 Gbit/s WAN in sync mode
  against protocol C and async mode against protocol A: every workload of bench/workloads.py
  on remirror's mirror and on DRBD's device, each after the link and both disks went quiet,
  with both mirrors' health read before and after (a cell in which either lost its peer is
  marked and left out of the ratios), and the write requests and KiB each leg's disk took
  during each job (from its block stat: what a latency or rate row alone does not explain);
- the same outage for each over the WAN in sync mode and protocol C: the link cut at site-a,
  1000 random 4 KiB writes over 384 MiB, the link back (remirror: a reconcile pass, as the
  reconciler's next; DRBD: it reconnects by itself) until both legs are in sync again;
- both mirrors taken apart and their disks wiped.

Which mirror goes first alternates between rounds and between cells. The results
(OUT/results.json, rewritten after each step) record this checkout's commit and the wheel the
hosts run, the command, each host's kernel and tool versions, the dilation before and after,
every DRBD setting and remirror's profile, the machine's load at each cell. BENCH_SECONDS
sets each fio job's length (15), BENCH_TRACE_SECONDS the trace's (60), PEER_ROUNDS the rounds
(3), PEER_HOURS when no new round starts, from the first (4); PEER_CELLS, PEER_JOBS and
PEER_OUTAGE=0 a focused run (below), PEER_BITMAP_CHUNK remirror's bitmap chunk (the profile's
default). Lab figures are lab time: the report (bench/peer_report.py) gives ratios within the
run, remirror / DRBD in each round, and their median and spread.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))

from tests.hosts_lab.mirror import wait_mirrored  # noqa: E402 - after the checkout is on the path
from workloads import FIO_JOBS, JOBS  # noqa: E402 - bench/'s own, beside this file

from remirror.facts.parsers import BlockStat, parse_block_stat  # noqa: E402
from remirror.lab import dilation as probes  # noqa: E402
from remirror.lab import model  # noqa: E402
from remirror.lab.hosts import drbd  # noqa: E402
from remirror.lab.hosts.image import VENV  # noqa: E402
from remirror.lab.hosts.lab import KNOWN_HOSTS, SITE_KEY, HostsLab  # noqa: E402
from remirror.lab.hosts.machine import Host  # noqa: E402

ROUNDS = int(os.environ.get("PEER_ROUNDS", "3"))
HOURS = float(os.environ.get("PEER_HOURS", "4"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "15"))
TRACE_SECONDS = int(os.environ.get("BENCH_TRACE_SECONDS", "60"))
RAMP_SECONDS = 3  # each judged fio job's start left out, for both (bench/workloads.py)
QD1_IOS = 100  # the QD1 job's p99 from at least this many writes (bench/workloads.py)
DISK_MIB = 512
MEMORY = "2G"  # null_blk keeps the modelled disks' data in the host's memory: 1 GiB at site-b
PROFILE = "/etc/remirror/peer.yaml"
MD = "/dev/md/p0"
DRBD_DEVICE = "/dev/drbd1"
DISKS = {"remirror": ("/dev/lab/a0", "/dev/lab/b0"), "drbd": ("/dev/lab/a1", "/dev/lab/b1")}
BASELINE = "/dev/lab/a2"
A_ADDRESS, B_ADDRESS = "192.0.2.1", "192.0.2.2"  # the link's ends (remirror.lab.hosts.lab)
BENCH_DIR = "/root/bench"
PYTHON = f"{VENV}/bin/python"
LINKS: dict[str, model.LinkModel] = {
    "LAN": model.LAN,
    # The DCD paper's 14 ms round trip over a metro fibre, as bench/suite.py's S-iW and async-W.
    "WAN": model.LinkModel(rate_bit_s=1e9, delay_s=7e-3),
}
MODES: dict[str, drbd.WireProtocol] = {"sync": "C", "async": "A"}  # and the protocol each is held to
CELLS = [(link, mode) for link in LINKS for mode in MODES]
# A focused run (one question, minutes rather than an hour): PEER_CELLS="LAN sync,WAN async",
# PEER_JOBS=qd1 (names of bench/workloads.py's JOBS), PEER_OUTAGE=0. The report shows what ran.
CELLS = [c for c in CELLS if f"{c[0]} {c[1]}" in os.environ.get("PEER_CELLS", "").split(",")] or CELLS
JOB_NAMES = [name for name in JOBS if name in os.environ.get("PEER_JOBS", "").split(",")] or list(JOBS)
BASELINE_JOBS = [name for name in FIO_JOBS if name in JOB_NAMES] or list(FIO_JOBS)  # the bare disk's
WITH_OUTAGE = os.environ.get("PEER_OUTAGE", "1") != "0"
# md's write-intent bitmap chunk in remirror's profile (`replication.bitmap_chunk`, as the profile
# spells it: 64KiB), the profile's default when unset: what a smaller one saves after an outage
# and costs while the mirror runs.
BITMAP_CHUNK = os.environ.get("PEER_BITMAP_CHUNK", "")
OUTAGE_WRITES = 1000
OUTAGE_REGION = 384 << 20  # six of remirror's 64 MiB bitmap chunks, as bench/suite.py's

results: dict[str, Any] = {}


def log(message: str) -> None:
    sys.stderr.write(f"peer {time.strftime('%H:%M:%S')}: {message}\n")
    sys.stderr.flush()


def save(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def profile_text(mode: str) -> str:
    """remirror's mirror on the modelled disks, as a site writes it: sync or async mode,
    remirror's defaults otherwise (a 64 MiB bitmap chunk, write-behind's default backlog), the
    `wan` iSCSI timeouts as the single-VM lab's bench."""
    ssh = f"ssh: {{identity_file: {SITE_KEY}, known_hosts: {KNOWN_HOSTS}}}"
    local, remote = DISKS["remirror"]
    chunk = f", bitmap_chunk: {BITMAP_CHUNK}" if BITMAP_CHUNK else ""
    return (
        "version: 1\nname: peer\nsites:\n"
        f"  site-a: {{host: 'ssh://root@site-a', {ssh}}}\n"
        f"  site-b: {{host: 'ssh://root@site-b', {ssh}}}\n"
        "mirrors:\n"
        f"  - name: p0\n    device: {MD}\n"
        f'    primary: {{site: site-a, disk: {local}, portal: "{A_ADDRESS}:3260"}}\n'
        "    replicas:\n"
        f'      - {{site: site-b, disk: {remote}, portal: "{B_ADDRESS}:3260"}}\n'
        f"    replication: {{mode: {mode}, on_link_loss: degrade{chunk}}}\n"
        "    iscsi: {timeouts: wan}\n"
    )


def drbd_resource(protocol: drbd.WireProtocol, link: model.LinkModel, dilation: float) -> drbd.Resource:
    """DRBD's pair on the modelled disks, tuned as the user guide tunes it for this link.

    - A resync held to the link's rate (in the lab's time, as the link is shaped), so that the
      disk is its only other limit, as md's resync has none of its own.
    - Enough in flight to keep the disk busy over a round trip: twice the rate of the slower of
      the link and the disk times the round trip plus a read and a write of the disk (each
      dilated, and the rate divided by the same factor: the product is the hardware's).
    - A ping's answer given the dilated round trip: the default 0.5 s is a LAN's, and under
      dilation a loaded WAN's round trip is D times longer than the hardware's.
    """
    fastest = min(link.rate_bit_s / 8, model.HDD.sequential_mb_s * 1e6)  # bytes/s, physical
    in_flight = 2 * fastest * (2 * link.delay_s + 2 * model.HDD.service_ms / 1000)
    local, remote = DISKS["drbd"]
    return drbd.Resource(
        name="peer",
        protocol=protocol,
        minor=1,
        primary=drbd.End("site-a", A_ADDRESS, local),
        secondary=drbd.End("site-b", B_ADDRESS, remote),
        tuning=drbd.Tuning(
            c_max_rate=f"{math.ceil(link.rate_bit_s / 8 / dilation / 1024)}k",
            c_fill_target=f"{max(1024, math.ceil(in_flight / 1024))}k",
            ping_timeout=min(300, max(5, round(5 * dilation))),
        ),
    )


def shape(b: Host, link: model.LinkModel, dilation: float) -> list[str]:
    """The modelled link at site-b, both directions, dilated; its netem arguments."""
    args = link.netem(dilation)
    delay = args[args.index("delay") + 1]
    rate = args[args.index("rate") + 1]
    b.run(f"remirror lab wan --delay {delay} --rate {rate}")
    return args


def disk_counters(host: Host, disk: str) -> BlockStat:
    return parse_block_stat(host.run(f"cat /sys/class/block/$(basename $(readlink -f {disk}))/stat").stdout)


def written(host: Host, disk: str) -> int:
    """Sectors written to `disk` since the host booted."""
    return disk_counters(host, disk).sectors_written


def sent(host: Host) -> int:
    """Bytes the host sent on its one link (eth1; eth0 is the lab's control link)."""
    return int(host.run("cat /sys/class/net/eth1/statistics/tx_bytes").stdout)


def md_sysfs(a: Host, name: str) -> str:
    return a.run(f"cat /sys/block/$(basename $(readlink -f {MD}))/md/{name}").stdout.strip()


def kernel_log(host: Host) -> str:
    return host.run("dmesg").stdout


def quiet(lab: HostsLab, timeout: float = 600) -> float:
    """Until neither host sends much on the link nor site-b's disks take writes for 3 s (an
    async mirror's backlog drained, the last job's tail gone); the seconds it took."""
    a, b = lab["site-a"], lab["site-b"]
    started = time.monotonic()

    def reading() -> tuple[int, int, int]:
        return sent(a), written(b, DISKS["remirror"][1]), written(b, DISKS["drbd"][1])

    last = reading()
    while time.monotonic() - started < timeout:
        time.sleep(3)
        now = reading()
        if now[0] - last[0] < 64 << 10 and now[1:] == last[1:]:
            return time.monotonic() - started
        last = now
    return time.monotonic() - started


def health(lab: HostsLab, resource: drbd.Resource) -> dict[str, Any]:
    """Both mirrors whole or not: md's degraded count and members, DRBD's states and what it
    has out of sync; and netem's drops at site-b (the link's, not a fault)."""
    a, b = lab["site-a"], lab["site-b"]
    peer = drbd.state(a, resource)
    drops = re.findall(r"dropped (\d+)", b.run("tc -s qdisc show dev eth1").stdout)
    return {
        "md_degraded": md_sysfs(a, "degraded"),
        "md_members": " ".join(
            a.run(f"cat /sys/block/$(basename $(readlink -f {MD}))/md/dev-*/state").stdout.split()
        ),
        "drbd": None
        if peer is None
        else f"{peer.connection} {'/'.join(peer.disks)} oos:{peer.counters.get('oos')}",
        "netem_dropped": sum(int(n) for n in drops),
    }


def whole(state: dict[str, Any]) -> bool:
    return (
        state["md_degraded"] == "0"
        and "faulty" not in state["md_members"]
        and str(state["drbd"]).startswith("Connected UpToDate/UpToDate oos:0")
    )


def requests_taken(before: BlockStat, after: BlockStat) -> dict[str, float]:
    """What a disk took between two readings: write requests, KiB written, KiB per write."""
    writes = after.writes - before.writes
    kib = (after.sectors_written - before.sectors_written) / 2
    return {"writes": writes, "kib_written": kib, "kib_per_write": kib / writes if writes else 0.0}


def at_dr(before: BlockStat, after: BlockStat) -> dict[str, float]:
    """What a sync wrote at the DR site's disk: its bytes, its write requests and their mean
    size (the modelled disk serves each request in one service time, so a copy in smaller
    requests takes longer)."""
    taken = requests_taken(before, after)
    return {
        "bytes_written_at_dr": taken["kib_written"] * 1024,
        "writes_at_dr": taken["writes"],
        "kib_per_write_at_dr": taken["kib_per_write"],
    }


def read_at_primary(before: BlockStat, after: BlockStat) -> dict[str, float]:
    """What a sync read from the primary's disk: its read requests and their mean size (md's
    copy reads its source in RESYNC_BLOCK_SIZE pieces, 64 KiB; under the model each request
    costs a service time)."""
    reads = after.reads - before.reads
    kib = (after.sectors_read - before.sectors_read) / 2
    return {"reads_at_primary": reads, "kib_per_read_at_primary": kib / reads if reads else 0.0}


def workloads(lab: HostsLab, device: str, legs: tuple[str, str] | None = None) -> dict[str, Any]:
    """bench/workloads.py's jobs on `device` at site-a, one at a time; with the mirror's `legs`
    (site-a's disk, site-b's), every job, each with the requests each leg's disk took during it
    (under "requests": what explains a row the latencies alone do not, e.g. md's extra writes
    or DRBD's merged ones); without, the fio jobs alone (the bare disk's baseline)."""
    a, b = lab["site-a"], lab["site-b"]
    env = (
        f"BENCH_SECONDS={SECONDS} BENCH_TRACE_SECONDS={TRACE_SECONDS} BENCH_RAMP_SECONDS={RAMP_SECONDS}"
        f" BENCH_QD1_IOS={QD1_IOS}"
    )
    answer: dict[str, Any] = {}
    requests: dict[str, dict[str, dict[str, float]]] = {}
    for name in JOB_NAMES if legs else BASELINE_JOBS:
        legs_of = zip((a, b), legs, strict=True) if legs else ()
        counted = [(host, disk, disk_counters(host, disk)) for host, disk in legs_of]
        done = a.run(
            f"cd {BENCH_DIR} && {env} python3 workloads.py {shlex.quote(device)} --job {name}", timeout=3600
        )
        answer[name] = json.loads(done.stdout)
        if counted:
            requests[name] = {
                host.name: requests_taken(was, disk_counters(host, disk)) for host, disk, was in counted
            }
    if requests:
        answer["requests"] = requests
    return answer


def versions(host: Host) -> dict[str, str]:
    said = host.run(
        "uname -r; fio --version; mdadm --version 2>&1; modinfo -F version drbd;"
        " dpkg-query -W -f='${Version}' drbd-utils; echo; remirror --version"
    ).stdout.splitlines()
    keys = ("kernel", "fio", "mdadm", "drbd", "drbd-utils", "remirror")
    return dict(zip(keys, said, strict=False))


def measure_dilation(lab: HostsLab) -> dict[str, Any]:
    """Each host's dilation against this machine, by the single-VM lab's probes; the run uses
    their geometric mean (the hosts are the same kind of VM)."""
    here = probes.measure(scale=10)
    guests = {
        name: json.loads(host.run(f"{PYTHON} -m remirror.lab.dilation").stdout)
        for name, host in lab.hosts.items()
    }
    factors = {name: model.dilation_factor(here, guest) for name, guest in guests.items()}
    factor = math.exp(sum(math.log(f) for f in factors.values()) / len(factors))
    return {"factor": factor, "hosts": factors, "host_probes": here, "guest_probes": guests}


def commit() -> str:
    said = subprocess.run(
        ["git", "-C", str(CHECKOUT), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return said.stdout.strip()


def prepare(lab: HostsLab, out: Path) -> float:
    a, b = lab["site-a"], lab["site-b"]
    wheel = sorted((CHECKOUT / "build" / "site").glob("remirror-*.whl"))[-1]
    lab.boot_all()
    lab.install()
    dilation = measure_dilation(lab)
    factor = dilation["factor"]
    log(f"dilation {factor:.2f} ({dilation['hosts']})")
    disks: dict[str, Any] = {}
    for host, names in ((a, "a0 a1 a2"), (b, "b0 b1")):
        made = host.run(
            f"{PYTHON} -m remirror.lab.disks --model hdd --dilation {factor:.4f}"
            f" --size-mib {DISK_MIB} {names}"
        )
        disks[host.name] = json.loads(made.stdout)
    a.run(f"mkdir -p {BENCH_DIR}")
    for name in ("basics.py", "workloads.py", "traces/cloudphysics-w-sample.csv"):
        a.put(CHECKOUT / "bench" / name, f"{BENCH_DIR}/{name}")
    results["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": results.pop("commit"),  # as the run started (main): the wheel was built from it
        "wheel": {"file": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
        "command": " ".join(sys.argv),
        "settings": {
            "rounds": ROUNDS, "fio_seconds": SECONDS, "fio_ramp_seconds": RAMP_SECONDS, "qd1_ios": QD1_IOS,
            "trace_seconds": TRACE_SECONDS, "disk_mib": DISK_MIB, "host_memory": MEMORY,
            "cells": [f"{link} {mode}" for link, mode in CELLS], "jobs": JOB_NAMES, "outage": WITH_OUTAGE,
            "bitmap_chunk": BITMAP_CHUNK or None,  # None: the profile's default
        },
        "versions": {name: versions(host) for name, host in lab.hosts.items()},
        "dilation": dilation,
        "disks": disks,
        "declared_hdd": model.HDD.declared(),
        "links": {
            name: {"rate_bit_s": link.rate_bit_s, "delay_s_each_way": link.delay_s}
            for name, link in LINKS.items()
        },
        "outage": {"writes": OUTAGE_WRITES, "region_bytes": OUTAGE_REGION},
        "remirror_profile": profile_text("sync"),
    }  # fmt: skip
    save(out)
    return float(factor)


def md_copy_seconds(log_text: str) -> float | None:
    """The last recovery md ran, start to end, from the kernel log's timestamps."""
    starts = re.findall(r"\[\s*([\d.]+)\] md: recovery of RAID array (md\d+)", log_text)
    if not starts:
        return None
    began, array = float(starts[-1][0]), starts[-1][1]
    ends = re.findall(r"\[\s*([\d.]+)\] md: (md\d+): recovery done", log_text)
    done = [float(t) for t, name in ends if name == array and float(t) >= began]
    return done[-1] - began if done else None


def drbd_copy_seconds(log_text: str) -> float | None:
    """DRBD's own count of its last resync (`Resync done (total N sec; ...)`)."""
    found = re.findall(r"Resync done \(total (\d+) sec", log_text)
    return float(found[-1]) if found else None


def build_remirror(lab: HostsLab) -> dict[str, Any]:
    a, b = lab["site-a"], lab["site-b"]
    lab.write_profile("peer", profile_text("sync"))
    before = sent(a), disk_counters(b, DISKS["remirror"][1]), disk_counters(a, DISKS["remirror"][0])
    started = time.monotonic()
    a.run(f"remirror apply --yes {PROFILE}", timeout=900)
    wait_mirrored(a, timeout=3600, profile=PROFILE, md=MD)
    return {
        "seconds": time.monotonic() - started,
        "copy_seconds": md_copy_seconds(kernel_log(a)),
        "bytes_sent": sent(a) - before[0],
        **at_dr(before[1], disk_counters(b, DISKS["remirror"][1])),
        **read_at_primary(before[2], disk_counters(a, DISKS["remirror"][0])),
    }


def build_drbd(lab: HostsLab, resource: drbd.Resource) -> dict[str, Any]:
    a, b = lab["site-a"], lab["site-b"]
    before = sent(a), disk_counters(b, DISKS["drbd"][1]), disk_counters(a, DISKS["drbd"][0])
    started = time.monotonic()
    drbd.bring_up(a, b, resource)
    syncing = a.run("cat /proc/drbd").stdout
    drbd.wait_synced(a, resource, timeout=3600)
    return {
        "seconds": time.monotonic() - started,
        "copy_seconds": drbd_copy_seconds(kernel_log(a)),
        "bytes_sent": sent(a) - before[0],
        **at_dr(before[1], disk_counters(b, DISKS["drbd"][1])),
        **read_at_primary(before[2], disk_counters(a, DISKS["drbd"][0])),
        "proc_drbd_syncing": syncing,  # tests/unit's fixture
    }


def build_both(lab: HostsLab, factor: float, order: tuple[str, ...]) -> dict[str, Any]:
    """Blank disks made a mirror over the LAN, each alone, in `order`."""
    shape(lab["site-b"], LINKS["LAN"], factor)
    made: dict[str, Any] = {"order": order, "disk_bytes": DISK_MIB << 20}
    for system in order:
        quiet(lab)
        if system == "remirror":
            made[system] = build_remirror(lab)
        else:
            made[system] = build_drbd(lab, drbd_resource("C", LINKS["LAN"], factor))
        record = made[system]
        log(f"{system}'s initial sync: {record['seconds']:.0f}s, the copy {record['copy_seconds']}s")
    return made


def tear_down_both(lab: HostsLab, factor: float) -> None:
    a, b = lab["site-a"], lab["site-b"]
    a.run(f"remirror destroy --yes {PROFILE} p0", timeout=900)
    drbd.tear_down([a, b], drbd_resource("C", LINKS["LAN"], factor))
    for host, disks in ((a, ("a0", "a1")), (b, ("b0", "b1"))):
        for name in disks:
            host.run(f"wipefs --all --quiet /dev/lab/{name}")
            host.run(f"dd if=/dev/zero of=/dev/lab/{name} bs=1M count=8 oflag=direct status=none")


def set_mode(lab: HostsLab, mode: str, link: str, factor: float) -> dict[str, Any]:
    """Both mirrors in `mode` (remirror's apply; DRBD's protocol through drbdadm adjust),
    DRBD tuned for `link`; what each now runs with."""
    a, b = lab["site-a"], lab["site-b"]
    lab.write_profile("peer", profile_text(mode))
    a.run(f"remirror apply --yes {PROFILE}", timeout=900)
    wait_mirrored(a, timeout=1800, profile=PROFILE, md=MD)
    resource = drbd_resource(MODES[mode], LINKS[link], factor)
    for host in (a, b):
        host.write(resource.path, resource.text())
        host.run(f"drbdadm adjust {resource.name}")
    now = drbd.wait_synced(a, resource, timeout=600)
    if now.protocol != MODES[mode]:
        raise SystemExit(f"peer: DRBD runs protocol {now.protocol}, not {MODES[mode]}, after adjust")
    negotiated = a.run("iscsiadm -m session -P 2 | sed -n '/Negotiated/,/MaxOutstandingR2T/p'").stdout
    window = a.run("iscsiadm -m node -o show | grep -F 'tcp.window_size'").stdout
    return {
        "drbd": resource.settings(),
        "md_backlog": md_sysfs(a, "bitmap/backlog"),
        "md_safe_mode_delay": md_sysfs(a, "safe_mode_delay"),
        "md_legs": a.run("cat /proc/mdstat").stdout,
        "iscsi_negotiated": " ".join(negotiated.split()),
        "iscsi_node_window": window.strip(),
    }


def warm_up(a: Host) -> None:
    """Ten seconds of random writes over the region on each mirror, not recorded: md's bitmap
    chunks and DRBD's activity log extents of the region hot for both, as after any use."""
    for device in (MD, DRBD_DEVICE):
        a.run(
            f"fio --name=warm --filename={device} --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio"
            " --direct=1 --offset=64M --size=128M --time_based --runtime=10 --output-format=terse",
            timeout=600,
        )


def cell(lab: HostsLab, factor: float, link: str, mode: str, order: tuple[str, ...]) -> dict[str, Any]:
    netem = shape(lab["site-b"], LINKS[link], factor)
    measured: dict[str, Any] = {"netem": netem, "order": order, "settings": set_mode(lab, mode, link, factor)}
    resource = drbd_resource(MODES[mode], LINKS[link], factor)
    for system in order:
        waited = quiet(lab)
        before = health(lab, resource)
        load = Path("/proc/loadavg").read_text().split()[:3]
        started = time.monotonic()
        try:
            measured[system] = workloads(lab, MD if system == "remirror" else DRBD_DEVICE, DISKS[system])
        except Exception as error:  # noqa: BLE001 - one system's failed cell must not end the round
            measured[system] = {"error": str(error)[-500:]}
        after = health(lab, resource)
        measured[system]["run"] = {
            "seconds": time.monotonic() - started,
            "quiet_wait_s": waited,
            "health_before": before,
            "health_after": after,
            "valid": whole(before) and whole(after),
            "machine_load": load,
        }
        log(f"{link} {mode}/{MODES[mode]} {system}: {time.monotonic() - started:.0f}s, whole {whole(after)}")
    return measured


def outage(lab: HostsLab, factor: float, system: str) -> dict[str, Any]:
    """The link cut at site-a while the primary writes, then back; until the mirror is whole."""
    a, b = lab["site-a"], lab["site-b"]
    resource = drbd_resource("C", LINKS["WAN"], factor)
    device, dr_disk = (MD, DISKS["remirror"][1]) if system == "remirror" else (DRBD_DEVICE, DISKS["drbd"][1])
    quiet(lab)
    a.run("remirror lab link down")
    written_out = a.run(
        f"fio --name=outage --filename={device} --rw=randwrite --bs=4k --iodepth=1 --ioengine=psync"
        f" --direct=1 --size={OUTAGE_REGION} --number_ios={OUTAGE_WRITES} --randrepeat=0"
        " --output-format=json",
        timeout=3600,
    )
    stall = json.loads(written_out.stdout)["jobs"][0]["write"]["clat_ns"]["max"] / 1e9
    # What each recorded of the writes the DR site missed: md's dirty bitmap chunks, DRBD's
    # out-of-sync KiB.
    if system == "remirror":
        marked = " ".join(
            a.run(
                f"mdadm --examine-bitmap {DISKS['remirror'][0]} | grep -i -e dirty -e chunksize"
            ).stdout.split()
        )
    else:
        cut = a.run("cat /proc/drbd").stdout
        results.setdefault("fixtures", {})["proc_drbd_cut_off"] = cut  # tests/unit's
        shown = drbd.state(a, resource)
        marked = f"out of sync: {shown.counters.get('oos') if shown else 'unknown'} KiB"
    before = sent(a), disk_counters(b, dr_disk)
    a.run("remirror lab link up")
    back = time.monotonic()
    if system == "remirror":
        # As the reconciler's next pass would; `remirror-watch` is not running here. Its exit
        # code 1 says the repair is under way (remirror.reconcile: the resync has begun).
        passed = a.run(f"remirror reconcile {PROFILE}", check=False, timeout=900)
        if passed.returncode not in (0, 1):
            raise RuntimeError(f"remirror reconcile exited {passed.returncode}: {passed.stdout[-500:]}")
        wait_mirrored(a, timeout=3600, profile=PROFILE, md=MD)
        log_text = kernel_log(a)
        copy = md_copy_seconds(log_text)
    else:
        drbd.wait_synced(a, resource, timeout=3600)
        copy = drbd_copy_seconds(kernel_log(a))
    return {
        "seconds_link_back_to_in_sync": time.monotonic() - back,
        "copy_seconds": copy,
        "first_write_stall_s": stall,  # undilated timeouts (iSCSI's, DRBD's): a lab figure only
        "bytes_sent": sent(a) - before[0],
        **at_dr(before[1], disk_counters(b, dr_disk)),
        "marked_before_the_resync": marked,
    }


def outages(lab: HostsLab, factor: float, order: tuple[str, ...]) -> dict[str, Any]:
    shape(lab["site-b"], LINKS["WAN"], factor)
    set_mode(lab, "sync", "WAN", factor)
    done: dict[str, Any] = {"order": order}
    for system in order:
        done[system] = outage(lab, factor, system)
        took = done[system]["seconds_link_back_to_in_sync"]
        log(f"outage of {system}: in sync {took:.0f}s after the link came up")
    # The other mirror saw the same cuts with nothing to write: whole again before the teardown.
    drbd.wait_synced(lab["site-a"], drbd_resource("C", LINKS["WAN"], factor), timeout=1800)
    lab["site-a"].run(f"remirror reconcile {PROFILE}", check=False, timeout=900)
    wait_mirrored(lab["site-a"], timeout=1800, profile=PROFILE, md=MD)
    return done


def one_round(lab: HostsLab, factor: float, number: int, out: Path) -> None:
    a = lab["site-a"]
    first = ("remirror", "drbd") if number % 2 == 0 else ("drbd", "remirror")
    this: dict[str, Any] = {}
    results["rounds"].append(this)
    this["initial_sync"] = build_both(lab, factor, first)
    save(out)
    warm_up(a)
    quiet(lab)  # as before every mirror's jobs: the warm-up's writes drained first
    this["baseline"] = workloads(lab, BASELINE)
    for index, (link, mode) in enumerate(CELLS):
        order = first if index % 2 == 0 else first[::-1]
        this[f"{link} {mode}"] = cell(lab, factor, link, mode, order)
        save(out)
    if WITH_OUTAGE:
        this["outage"] = outages(lab, factor, first)
        save(out)
    tear_down_both(lab, factor)


def run_on_hosts(out: Path, body: Callable[[HostsLab, float, Path], None]) -> int:
    """One boot of the hosts' lab for a run of this kind (this module's, bench/peer_tail.py's):
    the checkout's commit recorded first (a dirty tree refused), both hosts prepared (prepare),
    `body(lab, factor, out)`, the dilation after; what finished is saved and the lab stopped
    whatever failed. The exit code: 1 when anything recorded an error."""
    results["commit"] = commit()  # before anything: an edit while it runs changes no result
    if results["commit"].endswith("-dirty") and not os.environ.get("PEER_ALLOW_DIRTY"):
        sys.exit(
            f"{Path(sys.argv[0]).stem}: the checkout has uncommitted changes:"
            " commit them (a result names its commit)"
        )
    work = Path(tempfile.mkdtemp(prefix="remirror-peer-", dir=os.environ.get("REMIRROR_LAB_TMPDIR")))
    lab = HostsLab(work, {"site-a": [], "site-b": []}, checkout=CHECKOUT, memory=MEMORY)
    started = time.monotonic()
    results["rounds"] = []
    try:
        factor = prepare(lab, out)
        body(lab, factor, out)
        results["meta"]["dilation_after"] = measure_dilation(lab)
    except (SystemExit, Exception) as error:  # noqa: BLE001 - recorded; what finished is kept
        results.setdefault("errors", {})["run"] = str(error)[-2000:]
    finally:
        results.setdefault("meta", {})["seconds"] = time.monotonic() - started
        save(out)
        for console in work.glob("*.console"):
            out.mkdir(parents=True, exist_ok=True)
            (out / console.name).write_bytes(console.read_bytes())
        lab.stop()
    log(f"done in {time.monotonic() - started:.0f}s: {out / 'results.json'}")
    return 1 if results.get("errors") else 0


def rounds(lab: HostsLab, factor: float, out: Path) -> None:
    """ROUNDS rounds, none started past PEER_HOURS from the first; a round that fails ends them
    (what the next builds stands on its teardown), recorded for the report."""
    started = time.monotonic()
    for number in range(ROUNDS):
        if time.monotonic() - started > HOURS * 3600:
            results.setdefault("errors", {})["rounds"] = f"stopped after {number} rounds: PEER_HOURS {HOURS}"
            return
        try:
            one_round(lab, factor, number, out)
        except (SystemExit, Exception) as error:  # noqa: BLE001 - record it; the report says what is missing
            log(f"round {number + 1}: failed: {error}")
            results.setdefault("errors", {})[f"round {number + 1}"] = str(error)[-2000:]
            save(out)
            return
        log(f"round {number + 1} done")


def main() -> int:
    return run_on_hosts(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out-peer").resolve(), rounds)


if __name__ == "__main__":
    sys.exit(main())
