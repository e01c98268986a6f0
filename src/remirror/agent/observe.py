"""Gather a site's raw facts: the text tools print and sysfs holds, plus LIO via rtslib
(remirror.agent.observe_lio).

Everything returned is JSON-able and interpreted by the pure parsers in
`remirror.facts`, so that what is gathered here stays dumb and what is
decided stays testable.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from remirror.agent import drill_records, observe_lio, seed_records, wireguard
from remirror.agent.cdp import read_index
from remirror.agent.direct import read_direct
from remirror.agent.generations import read_record
from remirror.errors import CommandError
from remirror.facts import parsers
from remirror.facts.cdp_index import INDEX_MAGIC, CdpPoints
from remirror.facts.dm import split_dm_listing
from remirror.facts.filesystems import HEAD_BYTES
from remirror.facts.generations import record_json
from remirror.facts.model import secret_digest
from remirror.facts.parsers import split_bitmaps, split_examine, split_wipefs_json
from remirror.runner.local import LocalRunner

_run = LocalRunner("agent").run

INITIATOR_NAME_FILE = Path("/etc/iscsi/initiatorname.iscsi")
MDADM_CONF = Path(parsers.MDADM_CONF)
ISCSI_NODES = Path("/etc/iscsi/nodes")


def observe(
    disks: list[str],
    portals: list[str] | None = None,
    probe: list[str] | None = None,
    records: list[str] | None = None,
) -> dict[str, Any]:
    """Everything the planner and health need to know about this site.

    `probe`: the disks whose first 4 KiB to read (would-be cache disks, mirrors with CDP, disks
    whose file system `keep_data` keeps), and
    `records`: the legs whose record to read (their last MiB). Only those: a
    read of an iSCSI disk whose link just went down waits for the session's
    replacement timeout, and a reconciler pass must not.
    """
    lio = observe_lio.read_beside()  # while the rest waits for wipefs and mdadm
    return {
        "portal_rtt": {portal: _round_trip(portal) for portal in portals or []},
        "hostname": os.uname().nodename,
        "clock": _clock(),
        "initiator": INITIATOR_NAME_FILE.read_text() if INITIATOR_NAME_FILE.exists() else "",
        "disks": _disks(disks, set(probe or []), set(records or [])),
        "arrays": _arrays(),
        "inactive_arrays": _inactive_arrays(),
        "sessions": _sessions(),
        "nodes": _nodes(),
        "lio": lio(),
        "lio_save_path": observe_lio.save_path(),
        "mdadm_conf": MDADM_CONF.read_text() if MDADM_CONF.exists() else "",
        "dm": _dm_devices(),
        "wireguard": wireguard.observe(),
        "drills": drill_records.read_records(),
        "seeds": seed_records.read_records(),
    }


def observe_disk(path: str) -> dict[str, Any]:
    """One disk as `observe` sees it, its head and leg record read: what `remirror seed`
    decides from before it reads or writes the disk."""
    found: dict[str, Any] = _disks([path], {path}, {path})[path]
    return found


def _clock() -> dict[str, float]:
    """The site's clock: the time, and its local offset from UTC (a resync schedule's windows are
    the primary's local hours, whoever plans)."""
    now = time.time()
    offset = datetime.fromtimestamp(now).astimezone().utcoffset()
    return {"time": now, "utc_offset": offset.total_seconds() if offset is not None else 0.0}


# remirror's device-mapper devices (caches, and the linear mapping a removed cache leaves).
DM_PREFIX = "remirror-"
# dm-writecache's superblock magic on an SSD cache device (drivers/md/dm-writecache.c,
# MEMORY_SUPERBLOCK_MAGIC, little-endian at offset 0).
WRITECACHE_MAGIC = (0x23489321).to_bytes(4, "little")


def _dm_devices() -> dict[str, Any]:
    """Table and status of each of remirror's dm devices, by name: `dmsetup table` and `status` of
    every device at once (a process costs a quarter second under emulation; a CDP stack is six
    devices), cut into each device's part."""
    kernel_names = {}
    for name_file in sorted(Path("/sys/block").glob("dm-*/dm/name")):
        try:
            name = name_file.read_text().strip()
        except OSError:
            continue  # removed since the listing
        if name.startswith(DM_PREFIX):
            kernel_names[name] = name_file.parent.parent.name
    if not kernel_names:
        return {}
    tables, statuses = (split_dm_listing(_run(["dmsetup", verb]).stdout) for verb in ("table", "status"))
    return {
        name: {"table": tables[name], "status": statuses[name], "kernel_name": kernel}
        for name, kernel in kernel_names.items()
        if name in tables and name in statuses  # one removed between the listings (a drill's copy)
    }


def _head(real: str) -> bytes | None:
    """A device's first 4 KiB (None: it cannot be read), past the page cache: dm-writecache
    writes its superblock with O_DIRECT, and the page cache could still hold what was there."""
    try:
        return read_direct(real, 0, HEAD_BYTES)
    except OSError:
        return None


def _first_sector(head: bytes | None) -> str:
    """What a device starts with: `zero`, `writecache` (a cache superblock), `cdp` (an index),
    `other`: may it become a cache, may CDP's metadata go there?"""
    if head is None:
        return "unreadable"
    if not any(head[:512]):
        return "zero"
    if head[:4] == WRITECACHE_MAGIC:
        return "writecache"
    return "cdp" if head[: len(INDEX_MAGIC)] == INDEX_MAGIC else "other"


def _round_trip(portal: str, timeout: float = 3.0) -> float | None:
    """Seconds a TCP handshake with an iSCSI portal takes (one round trip), None if it fails."""
    host, _, port = portal.rpartition(":")
    started = time.monotonic()
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return time.monotonic() - started
    except OSError:
        return None


def _disks(paths: list[str], probe: set[str], records: set[str]) -> dict[str, Any]:
    disks = {path: _disk(path, path in probe, path in records) for path in paths}
    _signatures_and_superblocks({path: info for path, info in disks.items() if _readable(info)})
    users = _users({os.path.realpath(path) for path, info in disks.items() if info["exists"]})
    for path, info in disks.items():
        if info["exists"]:
            info.update(users[os.path.realpath(path)])
    return disks


def _users(devices: set[str]) -> dict[str, dict[str, list[str]]]:
    """Who has each device (/dev/NAME) mounted or open: what destroy must not pull from under them."""
    users: dict[str, dict[str, list[str]]] = {dev: {"mounts": [], "openers": []} for dev in devices}
    numbers = {Path(dev).stat().st_rdev: dev for dev in devices}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        major, _, minor = fields[2].partition(":")
        dev = numbers.get(os.makedev(int(major), int(minor)))
        if dev is not None:
            users[dev]["mounts"].append(fields[4])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            links = {str(fd.readlink()) for fd in (proc / "fd").iterdir()}
            comm = (proc / "comm").read_text().strip()
        except OSError:  # gone, or not ours to look at
            continue
        for dev in devices & links:
            users[dev]["openers"].append(f"pid {proc.name} ({comm})")
    return users


def _disk(path: str, probe: bool, record: bool) -> dict[str, Any]:
    if not Path(path).exists():
        return {"exists": False}
    real = os.path.realpath(path)
    info: dict[str, Any] = {"exists": True, "kernel_name": Path(real).name}
    if device_state := _offline(info["kernel_name"]):
        info["offline"] = device_state
        return info
    # The capacity in 512-byte sectors whatever the logical block size (block/genhd.c): what
    # `blockdev --getsize64` asks with an ioctl, without a command per disk.
    info["size"] = int(Path(f"/sys/class/block/{info['kernel_name']}/size").read_text()) * 512
    rdev = Path(real).stat().st_rdev
    info["devno"] = f"{os.major(rdev)}:{os.minor(rdev)}"  # how dm tables name it
    if probe:
        head = _head(real)
        info["first_sector"] = _first_sector(head)
        if head is not None:
            info["head"] = head.hex()  # a file system's superblock: how far it reaches (keep_data)
        if info["first_sector"] == "cdp":
            index = read_index(real)
            if index is not None:
                info["cdp_points"] = dataclasses.asdict(CdpPoints.of(index))
    if record and (found := read_record(real)) is not None:
        info["leg_record"] = record_json(found)
    holders = Path(f"/sys/class/block/{info['kernel_name']}/holders")
    info["holders"] = sorted(p.name for p in holders.iterdir()) if holders.is_dir() else []
    return info


def _offline(kernel_name: str) -> str:
    """A SCSI disk whose iSCSI session is down is `blocked` (or offline): reading it would hang
    until the session recovers (a day under `on_link_loss: wait`). Say so instead of looking
    inside ("" for a disk that can be read)."""
    state = Path(f"/sys/class/block/{kernel_name}/device/state")
    device_state = state.read_text().strip() if state.exists() else "running"
    return "" if device_state == "running" else device_state


def _readable(info: dict[str, Any]) -> bool:
    return bool(info["exists"]) and "offline" not in info


def _signatures_and_superblocks(disks: dict[str, dict[str, Any]]) -> None:
    """Each disk's signatures (`wipefs`), md superblock (`mdadm --examine`) and write-intent bitmap
    (`mdadm --examine-bitmap`), each tool asked once for every disk of the site: under emulation
    a process costs a quarter of a second, and a pass observes a site for every command."""
    if not disks:
        return
    reals = {path: os.path.realpath(path) for path in disks}
    try:
        found = split_wipefs_json(_run(["wipefs", "--no-act", "--json", *reals.values()]).stdout)
    except CommandError:
        # A disk went offline under wipefs (its iSCSI session dropped): ask one at a time, so
        # that the others are seen and that one is reported for what it is now.
        found = _signatures_one_by_one(disks, reals)
    for info in disks.values():
        info["wipefs"] = found.get(info["kernel_name"], "")
    readable = {path: real for path, real in reals.items() if _readable(disks[path])}
    if not readable:
        return
    # Exit 1 when some disk has no superblock: mdadm says so on stderr and examines the rest.
    examined = split_examine(_run(["mdadm", "--examine", *readable.values()], ok_codes=(0, 1)).stdout)
    members = {path: real for path, real in readable.items() if "Array UUID" in examined.get(real, "")}
    for path, real in readable.items():
        disks[path]["examine"] = examined.get(real, "")
    if members:
        bitmaps = _run(["mdadm", "--examine-bitmap", *members.values()], ok_codes=(0, 1, 2)).stdout
        by_device = split_bitmaps(bitmaps)  # by the path mdadm was given
        for path, real in members.items():
            disks[path]["bitmap"] = by_device.get(real, "")


def _signatures_one_by_one(disks: dict[str, dict[str, Any]], reals: dict[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path, info in disks.items():
        try:
            found[info["kernel_name"]] = _run(["wipefs", "--no-act", "--json", reals[path]]).stdout
        except CommandError:
            if device_state := _offline(info["kernel_name"]):
                info["offline"] = device_state
                continue
            raise
    return {name: text for name, text in found.items() if text.strip()}


def _read_tree(base: Path, names: list[str]) -> dict[str, str]:
    values = {}
    for name in names:
        try:
            values[name] = (base / name).read_text()
        except OSError:
            continue
    return values


# Per member: its state, slot, writes in flight, bad block log (what it failed to write and md
# went on without: docs/safety.md) and where the array's data starts on it.
_MEMBER_FILES = ("state", "slot", "block/inflight", "bad_blocks", "unacknowledged_bad_blocks", "offset")


def _arrays() -> dict[str, Any]:
    arrays: dict[str, Any] = {}
    for md in sorted(Path("/sys/block").glob("md*")):
        base = md / "md"
        if not base.is_dir():
            continue
        names = [
            "array_state", "sync_action", "sync_completed", "degraded", "level", "raid_disks",
            "bitmap/chunksize", "bitmap/backlog", "bitmap/max_backlog_used", "mismatch_cnt", "sync_speed",
            "suspend_lo", "suspend_hi", "sync_speed_max", "sync_speed_min", "sync_max", "safe_mode_delay",
        ]  # fmt: skip
        for member in base.glob("dev-*"):
            names += [
                f"{member.name}/{leaf}"
                for leaf in (
                    "state",
                    "slot",
                    "block/inflight",
                    "bad_blocks",
                    "unacknowledged_bad_blocks",
                    "offset",
                )
            ]
        sysfs = _read_tree(base, names)
        if sysfs.get("level", "").strip() == "" or sysfs.get("array_state", "").strip() in (
            "clear",
            "inactive",
        ):
            continue
        detail = _run(["mdadm", "--detail", "--export", f"/dev/{md.name}"], ok_codes=(0, 1)).stdout
        # /dev/md/NAME links (udev): a glob of a missing directory is empty.
        links = {p.name: p.resolve().name for p in Path("/dev/md").glob("*")}
        arrays[md.name] = {
            "sysfs": sysfs,
            "detail": detail,
            "links": sorted(name for name, target in links.items() if target == md.name),
        }
    return arrays


def _inactive_arrays() -> dict[str, list[str]]:
    """Arrays assembled in part and never started (md127 -> its members' kernel names).

    udev's incremental assembly makes them from any leg a change event shows:
    they hold the leg without having written to it.
    """
    inactive = {}
    for md in sorted(Path("/sys/block").glob("md*")):
        try:
            state = (md / "md" / "array_state").read_text().strip()
        except OSError:
            continue
        if state == "inactive":
            inactive[md.name] = sorted(m.name.removeprefix("dev-") for m in (md / "md").glob("dev-*"))
    return inactive


def _sessions() -> list[dict[str, Any]]:
    sessions = []
    for session in sorted(Path("/sys/class/iscsi_session").glob("session*")):
        sid = int(session.name.removeprefix("session"))
        names = ["state", "targetname", "recovery_tmo", "initiatorname", "initial_r2t", "immediate_data"]
        values = _read_tree(session, [*names, "first_burst_len"])
        for connection in Path("/sys/class/iscsi_connection").glob(f"connection{sid}:*"):
            values.update(_read_tree(connection, ["persistent_address", "persistent_port"]))
        disks = sorted(p.name for p in session.glob("device/target*/*/block/*"))
        values["disk"] = disks[0] if disks else ""
        if disks:
            values.update(_read_tree(Path(f"/sys/class/block/{disks[0]}/queue"), ["scheduler"]))
        sessions.append({"sid": sid, "sysfs": values})
    return sessions


def _nodes() -> dict[str, Any]:
    """Node records straight from open-iscsi's database, secrets reduced to digests.

    `iscsiadm -o show` masks passwords, so a planner could never tell whether
    the stored secret is the right one; the records themselves hold them.
    """
    nodes: dict[str, Any] = {}
    for record in sorted(p for p in ISCSI_NODES.glob("*/*") if p.exists()):
        files = node_record_files(record)
        if not files:
            continue
        settings = {}
        for line in files[0].read_text().splitlines():
            key, sep, value = line.partition(" = ")
            if not sep:
                continue
            if ".auth.password" in key:
                value = secret_digest(value.strip())
            settings[key.strip()] = value.strip()
        nodes[f"{record.parent.name} {record.name}"] = settings
    return nodes


def node_record_files(record: Path) -> list[Path]:
    """The files of one node record: nodes/TARGET/ADDR,PORT[,TPGT] is a file
    (a record made without discovery) or a directory with one file per
    interface (`default`)."""
    return [record] if record.is_file() else sorted(f for f in record.iterdir() if f.is_file())
