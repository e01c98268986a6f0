"""The lab's disks inside the VM: plain virtio disks, or disks that behave like the
performance model's (null_blk), each under a device-mapper name in /dev/lab.

Part of the guest's setup (remirror.lab.guest); the model's arithmetic is in
remirror.lab.model, the probes that measure the dilation in remirror.lab.dilation. A host of
the hosts' lab makes the same modelled disks for the bench (bench/peer.py) with
`python -m remirror.lab.disks --model hdd --dilation D --size-mib N NAME...`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from remirror.lab import dilation as probes
from remirror.lab import model
from remirror.lab.spec import Disk, LabSpec
from remirror.runner.local import LocalRunner

log = logging.getLogger("remirror.lab")
run = LocalRunner("lab").run
DISK_WAIT_SECONDS = 60.0


def performance_model(spec: LabSpec) -> dict[str, Any] | None:
    """The lab's performance model, with its time dilation measured now if asked (`auto`)."""
    if not spec.disk_model:
        return None
    dilation: dict[str, Any] = {"factor": spec.dilation, "measured": spec.dilation is None}
    if spec.dilation is None:
        if spec.host_probes is None:
            raise RuntimeError("--dilation auto needs the host's probes (remirror.lab.host measures them)")
        started = time.monotonic()
        guest = probes.measure()
        dilation.update(
            factor=model.dilation_factor(spec.host_probes, guest),
            host=spec.host_probes,
            guest=guest,
            ratios=model.probe_ratios(spec.host_probes, guest),
        )
        log.info("dilation measured in %.1fs: %s", time.monotonic() - started, dilation)
    names = {spec.disk_model, model.CACHE_DISK_MODEL[spec.disk_model]}
    data_disk = model.DISK_MODELS[spec.disk_model]
    # No device of its own making: each is configured through configfs (_null_blk).
    run(["modprobe", "null_blk", "nr_devices=0"])
    return {
        "request_overhead": _request_overhead(data_disk, dilation["factor"]),
        "disk_model": spec.disk_model,
        "cache_disk_model": model.CACHE_DISK_MODEL[spec.disk_model],
        "declared": {name: model.DISK_MODELS[name].declared() for name in sorted(names)},
        "queue": {name: model.DISK_MODELS[name].queue() for name in sorted(names)},
        "lan": {"rate_bit_s": model.LAN.rate_bit_s, "delay_s": model.LAN.delay_s},
        "dilation": dilation,
    }


def _request_overhead(disk_model: model.DiskModel, dilation: float) -> dict[str, Any]:
    """What the guest itself adds to each request of a `disk_model` disk, measured on a scratch
    one, and the part of it the data disks' service time is shortened by (model.overhead_to_take_off)."""
    probe = Disk("probe", "a", 64 << 20, disk_model.name)
    service_s = disk_model.service_ms / 1000 * dilation
    device = _null_blk(probe, disk_model, dilation)
    try:
        measured = probes.request_overhead(device, service_s, disk_model.depth, disk_model.max_io)
    finally:
        _remove_null_blk(probe)
    taken_off = model.overhead_to_take_off(measured, service_s)
    log.info("request overhead %s, %.1f ms taken off", measured, taken_off * 1000)
    return {**measured, "taken_off_s": taken_off, "model": disk_model.name}


def make_modelled_disks(names: list[str], size: int, model_name: str, dilation: float) -> dict[str, Any]:
    """On a host of the hosts' lab: a disk of the model for each of `names` (/dev/lab/NAME, a
    dm device over null_blk, as the single-VM lab's), `dilation` times slower, with the
    host's own time per request measured on a scratch disk first and taken off, as the guest
    does at boot; what was measured."""
    disk_model = model.DISK_MODELS[model_name]
    run(["modprobe", "null_blk", "nr_devices=0"])
    overhead = _request_overhead(disk_model, dilation)
    Path("/dev/lab").mkdir(exist_ok=True)
    for name in names:
        disk = Disk(name, "host", size, model_name)
        device = _null_blk(disk, disk_model, dilation, overhead["taken_off_s"])
        _wrap(disk, device)
    return {"request_overhead": overhead, "dilation": dilation, "model": model_name}


def make_disks(spec: LabSpec, performance: dict[str, Any] | None) -> None:
    run(["udevadm", "settle", "--timeout=30"])
    for disk in spec.disks:
        by_id = Path(f"/dev/disk/by-id/virtio-{disk.serial}")
        _wait_for(by_id)
        device = os.path.realpath(by_id)
        if disk.model and performance is not None:
            overhead = performance["request_overhead"]
            taken_off = overhead["taken_off_s"] if overhead["model"] == disk.model else 0.0
            device = _null_blk(
                disk, model.DISK_MODELS[disk.model], performance["dilation"]["factor"], taken_off
            )
        _wrap(disk, device)


def _wrap(disk: Disk, device: str) -> None:
    """`disk` as /dev/lab/NAME: a dm device over `device`, so that a modelled disk and a plain
    one look the same to what sits on top."""
    sectors = int(run(["blockdev", "--getsz", device]).stdout)
    run(["dmsetup", "create", disk.dm_name, "--table", f"0 {sectors} linear {device} 0"])
    link = Path(disk.path)
    link.unlink(missing_ok=True)
    link.symlink_to(f"/dev/mapper/{disk.dm_name}")


NULL_BLK_CONFIG = Path("/sys/kernel/config/nullb")


def _null_blk(disk: Disk, disk_model: model.DiskModel, dilation: float, overhead_s: float = 0.0) -> str:
    """A null_blk device that stores `disk`'s data in the guest's memory and serves it as
    `disk_model` does, `dilation` times slower, its service time shortened by `overhead_s`
    (what the guest adds to each request); its /dev path. (The virtio disk stays unused.)"""
    config = NULL_BLK_CONFIG / f"nullb-{disk.name}"
    config.mkdir()
    attributes = {
        "size": disk.size >> 20,  # MiB
        "memory_backed": 1,
        "irqmode": 2,  # complete each request from a timer, completion_nsec after it started
        **disk_model.null_blk(dilation, overhead_s),
    }
    for name, value in attributes.items():
        (config / name).write_text(f"{value}\n")
    (config / "power").write_text("1\n")
    # Linux 5.19 and later name the disk after its configfs directory, older ones nullbINDEX.
    index = (config / "index").read_text().strip()
    device = _wait_for(Path("/dev") / config.name, Path(f"/dev/nullb{index}"))
    queue = Path("/sys/block") / device.name / "queue"
    for setting, text in disk_model.queue().items():  # in order: each depends on the last
        (queue / setting).write_text(f"{text}\n")
    return str(device)


def _remove_null_blk(disk: Disk) -> None:
    config = NULL_BLK_CONFIG / f"nullb-{disk.name}"
    (config / "power").write_text("0\n")
    config.rmdir()


def _wait_for(*names: Path) -> Path:
    """The first of `names` to appear (devtmpfs and udev make them shortly after the disk)."""
    deadline = time.monotonic() + DISK_WAIT_SECONDS
    while not (found := [name for name in names if name.exists()]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{' or '.join(map(str, names))} did not appear")
        time.sleep(0.2)
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description="Modelled disks on a host of the hosts' lab.")
    parser.add_argument("--model", choices=sorted(model.DISK_MODELS), required=True)
    parser.add_argument("--dilation", type=float, required=True)
    parser.add_argument("--size-mib", type=int, required=True)
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()
    made = make_modelled_disks(args.names, args.size_mib << 20, args.model, args.dilation)
    sys.stdout.write(json.dumps(made) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
